"""Intent classifier with a Trainer subclass: class-weighted, label-smoothed loss,
two learning rates (encoder / head), best-checkpoint reload at the end."""
import os
import torch
from transformers import Trainer, TrainingArguments, set_seed

from f_common import LABELS, tiny_bert
from f_common_hf import IntentCollator, IntentDataset, compute_metrics, init_gloo


class WeightedTrainer(Trainer):
    def __init__(self, *a, class_weights=None, smoothing=0.05, head_lr_mult=5.0, **kw):
        super().__init__(*a, **kw)
        self.class_weights = class_weights
        self.smoothing = smoothing
        self.head_lr_mult = head_lr_mult

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        w = self.class_weights.to(outputs.logits.device) if self.class_weights is not None else None
        loss = torch.nn.functional.cross_entropy(outputs.logits, labels, weight=w,
                                                 label_smoothing=self.smoothing)
        if num_items_in_batch is not None:  # Trainer no longer divides by the accumulation steps for us
            loss = loss / self.args.gradient_accumulation_steps
        return (loss, outputs) if return_outputs else loss

    def create_optimizer(self, model=None):
        if self.optimizer is None:
            m = self.model
            head = [p for n, p in m.named_parameters() if n.startswith("classifier")]
            no_decay = [p for n, p in m.named_parameters()
                        if not n.startswith("classifier") and ("bias" in n or "LayerNorm" in n)]
            decay = [p for n, p in m.named_parameters()
                     if not n.startswith("classifier") and not ("bias" in n or "LayerNorm" in n)]
            lr = self.args.learning_rate
            self.optimizer = torch.optim.AdamW([
                {"params": decay, "weight_decay": self.args.weight_decay, "lr": lr},
                {"params": no_decay, "weight_decay": 0.0, "lr": lr},
                {"params": head, "weight_decay": 0.0, "lr": lr * self.head_lr_mult},
            ])
        return self.optimizer


def main():
    init_gloo(30)
    set_seed(0)
    out = os.environ.get("OUT_DIR", "outputs")
    train, val = IntentDataset(1200, seed=1), IntentDataset(200, seed=2)
    counts = torch.bincount(torch.tensor([train.l2i[r["label"]] for r in train.rows]), minlength=len(LABELS))
    weights = counts.sum() / (len(LABELS) * counts.float())

    args = TrainingArguments(
        output_dir=os.path.join(out, "run"), use_cpu=True, ddp_backend="gloo", ddp_timeout=30,
        per_device_train_batch_size=16, per_device_eval_batch_size=32, gradient_accumulation_steps=2,
        learning_rate=2e-3, weight_decay=0.01, max_steps=60, warmup_steps=4,
        eval_strategy="steps", eval_steps=20, save_strategy="steps", save_steps=20, save_total_limit=2,
        load_best_model_at_end=True, metric_for_best_model="macro_f1", greater_is_better=True,
        logging_steps=5, report_to=[], dataloader_num_workers=0, seed=0, disable_tqdm=True,
    )
    trainer = WeightedTrainer(model=tiny_bert(len(LABELS)), args=args, train_dataset=train, eval_dataset=val,
                              data_collator=IntentCollator(), compute_metrics=compute_metrics,
                              class_weights=weights)
    trainer.train()
    metrics = trainer.evaluate()
    if trainer.is_world_process_zero():
        print("final", {k: round(v, 4) for k, v in metrics.items() if isinstance(v, float)})
        print("best checkpoint:", trainer.state.best_model_checkpoint)


if __name__ == "__main__":
    main()
