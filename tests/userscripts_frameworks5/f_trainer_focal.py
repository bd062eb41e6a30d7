"""Intent classifier trained with focal loss (Trainer subclass).  Evaluation is
customised: the metric report is printed as a table and only produced once."""
import os

import torch
from transformers import Trainer, TrainingArguments, set_seed

from f_common import LABELS, tiny_bert
from f_common_hf import IntentCollator, IntentDataset, compute_metrics, init_gloo


class FocalTrainer(Trainer):
    gamma = 2.0

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logp = torch.log_softmax(outputs.logits, dim=-1)
        logp_t = logp.gather(1, labels[:, None]).squeeze(1)
        loss = (-(1 - logp_t.exp()) ** self.gamma * logp_t).mean()
        return (loss, outputs) if return_outputs else loss

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        # the report is identical on every rank, so only build it on the main process
        if not self.is_world_process_zero():
            return {}
        metrics = super().evaluate(eval_dataset, ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix)
        print(f"step {self.state.global_step:>4} | " + " | ".join(
            f"{k[len(metric_key_prefix) + 1:]}={v:.4f}" for k, v in metrics.items() if isinstance(v, float)))
        return metrics


def main():
    init_gloo(30)
    set_seed(0)
    train, val = IntentDataset(1500, seed=11), IntentDataset(300, seed=12)
    args = TrainingArguments(
        output_dir=os.path.join(os.environ.get("OUT_DIR", "outputs"), "focal"), use_cpu=True,
        ddp_backend="gloo", ddp_timeout=30,
        per_device_train_batch_size=16, per_device_eval_batch_size=32,
        learning_rate=2e-3, max_steps=60, warmup_steps=5, lr_scheduler_type="cosine",
        eval_strategy="steps", eval_steps=20, save_strategy="no",
        logging_steps=10, report_to=[], dataloader_num_workers=0, seed=0, disable_tqdm=True,
    )
    trainer = FocalTrainer(model=tiny_bert(len(LABELS)), args=args, train_dataset=train, eval_dataset=val,
                           data_collator=IntentCollator(), compute_metrics=compute_metrics)
    trainer.train()
    trainer.save_model(os.path.join(args.output_dir, "final"))


if __name__ == "__main__":
    main()
