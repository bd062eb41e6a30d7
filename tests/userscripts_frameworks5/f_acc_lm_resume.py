"""Tiny GPT-2 language model on the intent corpus with accelerate: checkpoints with
save_state every epoch, resumes from the newest one when restarted, perplexity through
gather_for_metrics."""
import math
import os
from datetime import timedelta

# defaults so the script can also be started directly from a notebook / IDE
os.environ["MASTER_ADDR"] = "127.0.0.1"
os.environ["MASTER_PORT"] = "29500"

import torch
from torch.utils.data import DataLoader
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import ProjectConfiguration, set_seed
from transformers import GPT2Config, GPT2LMHeadModel

from f_common import VOCAB, encode, make_corpus, pad_batch


def lm_collate(batch):
    ids, mask = pad_batch(batch)
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def main():
    project = ProjectConfiguration(project_dir="lm_run", automatic_checkpoint_naming=True, total_limit=2)
    accelerator = Accelerator(
        cpu=True, gradient_accumulation_steps=2, project_config=project,
        kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=timedelta(seconds=30))])
    set_seed(0)

    with accelerator.main_process_first():
        texts = [r["text"] for r in make_corpus(2400, seed=3)]
        data = [encode(t) for t in texts]
    train_dl = DataLoader(data[200:], batch_size=16, shuffle=True, collate_fn=lm_collate)
    val_dl = DataLoader(data[:200], batch_size=32, collate_fn=lm_collate)

    cfg = GPT2Config(vocab_size=len(VOCAB), n_positions=32, n_embd=48, n_layer=2, n_head=2,
                     bos_token_id=2, eos_token_id=3, pad_token_id=0)
    model = GPT2LMHeadModel(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model, optimizer, train_dl, val_dl = accelerator.prepare(model, optimizer, train_dl, val_dl)

    ckpt_root = os.path.join("lm_run", "checkpoints")
    start_epoch = 0
    if os.path.isdir(ckpt_root) and os.listdir(ckpt_root):
        last = sorted(os.listdir(ckpt_root), key=lambda d: int(d.split("_")[-1]))[-1]
        accelerator.load_state(os.path.join(ckpt_root, last))
        start_epoch = int(last.split("_")[-1]) + 1

    @accelerator.on_local_main_process
    def log(msg):
        print(msg, flush=True)

    for epoch in range(start_epoch, 3):
        model.train()
        for batch in train_dl:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
        model.eval()
        losses = []
        for batch in val_dl:
            with torch.no_grad():
                out = model(**batch)
            losses.append(accelerator.gather_for_metrics(out.loss.repeat(batch["input_ids"].shape[0])))
        ppl = math.exp(torch.cat(losses).mean().item())
        log(f"epoch {epoch}: val perplexity {ppl:.2f}")
        accelerator.save_state()

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
