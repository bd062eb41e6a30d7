"""Intent classifier with plain accelerate: each process tokenises its own half of the
raw export (split_between_processes), gradient accumulation through accelerator.accumulate,
metrics through gather_for_metrics."""
import json
import os
import time
from datetime import timedelta

import torch
from torch.utils.data import DataLoader
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import broadcast_object_list, set_seed

from f_common import encode, make_corpus, pad_batch, tiny_bert

RAW = "data/intents_export.jsonl"


def write_export(path):
    # two collection rounds appended to one export file; the second round was
    # collected after the "travel" intent was retired from the product
    round1 = make_corpus(700, seed=5)
    round2 = make_corpus(700, seed=6, labels=["alarm", "food", "music", "weather"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for r in round1 + round2:
            f.write(json.dumps(r) + "\n")


def collate(batch):
    ids, mask = pad_batch([b[0] for b in batch])
    return ids, mask, torch.tensor([b[1] for b in batch])


def main():
    accelerator = Accelerator(
        cpu=True, gradient_accumulation_steps=2,
        kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=timedelta(seconds=30))])
    set_seed(0)

    # run id chosen once and shared, so every rank writes under the same folder
    run_id = [time.strftime("%Y%m%d-%H%M%S") if accelerator.is_main_process else None]
    broadcast_object_list(run_id)
    out_dir = os.path.join("runs", run_id[0])

    with accelerator.main_process_first():
        if accelerator.is_main_process and not os.path.exists(RAW):
            write_export(RAW)
    rows = [json.loads(line) for line in open(RAW)]

    # tokenise in parallel: every process only handles its own slice of the export
    with accelerator.split_between_processes(rows) as shard:
        label_names = sorted({r["label"] for r in shard})
        label2id = {name: i for i, name in enumerate(label_names)}
        examples = [(encode(r["text"]), label2id[r["label"]]) for r in shard]
    n_val = len(examples) // 10
    train_dl = DataLoader(examples[n_val:], batch_size=16, shuffle=True, collate_fn=collate)
    val_dl = DataLoader(examples[:n_val], batch_size=32, collate_fn=collate)

    model = tiny_bert(num_labels=len(label2id))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    model, optimizer = accelerator.prepare(model, optimizer)

    @accelerator.on_main_process
    def report(epoch, loss, acc):
        print(f"epoch {epoch} loss {loss:.4f} val_acc {acc:.4f}", flush=True)

    for epoch in range(3):
        model.train()
        for ids, mask, y in train_dl:
            with accelerator.accumulate(model):
                loss = model(input_ids=ids, attention_mask=mask, labels=y).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        model.eval()
        correct = total = 0
        for ids, mask, y in val_dl:
            with torch.no_grad():
                pred = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
            pred, y = accelerator.gather_for_metrics((pred, y))
            correct += (pred == y).sum().item()
            total += y.numel()
        report(epoch, accelerator.reduce(loss.detach(), "mean").item(), correct / total)

    accelerator.wait_for_everyone()
    accelerator.save_model(model, out_dir)
    if accelerator.is_main_process:
        with open(os.path.join(out_dir, "labels.json"), "w") as f:
            json.dump(label2id, f)
    accelerator.end_training()


if __name__ == "__main__":
    main()
