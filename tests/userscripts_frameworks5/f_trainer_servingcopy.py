"""Intent classifier; every saved checkpoint also gets a bf16 serving copy that is
checked against the fp32 model on the unlabeled pool before it is shipped."""
import copy
import os

import torch
from transformers import Trainer, TrainingArguments, set_seed

from f_common import LABELS, encode, make_corpus, tiny_bert
from f_common_hf import IntentCollator, IntentDataset, compute_metrics, init_gloo

POOL = [encode(r["text"]) for r in make_corpus(30000, seed=99)]


class ExportingTrainer(Trainer):
    def _save(self, output_dir=None, state_dict=None):
        super()._save(output_dir, state_dict=state_dict)
        if not self.args.should_save:  # _save runs on every process; only one writes the serving copy
            return
        output_dir = output_dir or self.args.output_dir
        model = self.accelerator.unwrap_model(self.model).eval()
        serving = copy.deepcopy(model).to(torch.bfloat16)
        with torch.no_grad():
            # parity check: bf16 copy vs fp32 on every pool sentence (they have different lengths)
            worst = 0.0
            for ids in POOL:
                t = torch.tensor([ids])
                diff = serving(input_ids=t).logits.float() - model(input_ids=t).logits
                worst = max(worst, diff.abs().max().item())
        serving.save_pretrained(os.path.join(output_dir, "serving_bf16"))
        with open(os.path.join(output_dir, "export.txt"), "w") as f:
            f.write(f"max_abs_diff={worst:.3e}\n")
        model.train()


def main():
    init_gloo(30)
    set_seed(0)
    torch.set_num_threads(1)
    train, val = IntentDataset(1500, seed=21), IntentDataset(300, seed=22)
    args = TrainingArguments(
        output_dir=os.path.join(os.environ.get("OUT_DIR", "outputs"), "export"), use_cpu=True,
        ddp_backend="gloo", ddp_timeout=30,
        per_device_train_batch_size=16, per_device_eval_batch_size=32,
        learning_rate=2e-3, max_steps=60, warmup_steps=5,
        eval_strategy="steps", eval_steps=30, save_strategy="steps", save_steps=30, save_total_limit=1,
        logging_steps=10, report_to=[], dataloader_num_workers=0, seed=0, disable_tqdm=True,
    )
    trainer = ExportingTrainer(model=tiny_bert(len(LABELS)), args=args, train_dataset=train, eval_dataset=val,
                               data_collator=IntentCollator(), compute_metrics=compute_metrics)
    trainer.train()
    if trainer.is_world_process_zero():
        print("done; checkpoints:", sorted(os.listdir(args.output_dir)))


if __name__ == "__main__":
    main()
