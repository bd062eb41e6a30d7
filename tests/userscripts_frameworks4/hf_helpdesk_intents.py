"""Help-desk intent classifier: tiny DistilBERT + HF Trainer, HfArgumentParser configs.

Same job we run on the training cluster; the ClusterEnv block below carries the
settings from our sbatch template so that a plain `torchrun` on a node behaves
like the scheduled job (thread count, tokenizer parallelism, socket interface).

    torchrun --nproc-per-node 2 hf_helpdesk_intents.py --num_train_epochs 3
"""
import json
import os
import sys
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import accuracy_score, f1_score
from transformers import (
    DistilBertConfig,
    DistilBertForSequenceClassification,
    HfArgumentParser,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from hfacc_common import TICKET_QUEUES, arm_watchdog, build_word_tokenizer, make_tickets, run_dir, say

SCRIPT = "hf_helpdesk_intents"


@dataclass
class ClusterEnv:
    """Launch environment shared with the cluster sbatch template (infra/train.sbatch)."""
    socket_ifname: str = field(default_factory=lambda: os.environ.get("TRAIN_SOCKET_IFNAME", "bond0"))
    omp_threads: int = 1
    tokenizers_parallelism: str = "false"

    def export(self):
        os.environ.setdefault("OMP_NUM_THREADS", str(self.omp_threads))
        os.environ.setdefault("TOKENIZERS_PARALLELISM", self.tokenizers_parallelism)
        # pin both collective backends to the bonded data-plane interface
        os.environ.setdefault("NCCL_SOCKET_IFNAME", self.socket_ifname)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", self.socket_ifname)
        return {k: os.environ[k] for k in ("OMP_NUM_THREADS", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")}


@dataclass
class DataArguments:
    n_train: int = field(default=640, metadata={"help": "synthetic training tickets"})
    n_eval: int = field(default=160)
    max_length: int = field(default=32)
    min_freq: int = field(default=2, metadata={"help": "minimum token count for the vocabulary"})


@dataclass
class ModelArguments:
    dim: int = field(default=64)
    n_layers: int = field(default=2)
    n_heads: int = field(default=4)
    dropout: float = field(default=0.1)


class IntentDataset(torch.utils.data.Dataset):
    def __init__(self, rows, tokenizer, max_length):
        self.enc = tokenizer([r["text"] for r in rows], truncation=True, max_length=max_length,
                             padding="max_length")
        self.labels = [r["label"] for r in rows]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": torch.tensor(self.enc["input_ids"][i]),
                "attention_mask": torch.tensor(self.enc["attention_mask"][i]),
                "labels": torch.tensor(self.labels[i])}


def compute_metrics(p):
    preds = p.predictions.argmax(-1)
    return {"accuracy": accuracy_score(p.label_ids, preds),
            "weighted_f1": f1_score(p.label_ids, preds, average="weighted")}


class ThroughputCallback(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and "loss" in logs:
            say(f"step {state.global_step}/{state.max_steps} loss={logs['loss']:.4f} lr={logs.get('learning_rate', 0):.2e}")


def main():
    cluster = ClusterEnv()
    exported = cluster.export()
    out = run_dir(SCRIPT)
    arm_watchdog(80)

    parser = HfArgumentParser((DataArguments, ModelArguments, TrainingArguments))
    defaults = ["--output_dir", str(out / "run"), "--num_train_epochs", "3", "--per_device_train_batch_size", "16",
                "--per_device_eval_batch_size", "40", "--learning_rate", "2e-3", "--eval_strategy", "epoch",
                "--save_strategy", "epoch", "--save_total_limit", "1", "--logging_steps", "10",
                "--report_to", "none", "--use_cpu", "--ddp_backend", "gloo", "--ddp_timeout", "30",
                "--ddp_find_unused_parameters", "false", "--seed", "21"]
    data_args, model_args, training_args = parser.parse_args_into_dataclasses(defaults + sys.argv[1:])
    say(f"launch env {exported}; world_size={training_args.world_size}")
    set_seed(training_args.seed)

    rows = make_tickets(data_args.n_train + data_args.n_eval, seed=training_args.seed)
    train_rows, eval_rows = rows[: data_args.n_train], rows[data_args.n_train:]
    tokenizer = build_word_tokenizer([r["text"] for r in train_rows], min_freq=data_args.min_freq,
                                     model_max_length=data_args.max_length)

    config = DistilBertConfig(vocab_size=len(tokenizer), dim=model_args.dim, n_layers=model_args.n_layers,
                              n_heads=model_args.n_heads, hidden_dim=model_args.dim * 4,
                              dropout=model_args.dropout, max_position_embeddings=64,
                              num_labels=len(TICKET_QUEUES), pad_token_id=tokenizer.pad_token_id)
    model = DistilBertForSequenceClassification(config)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=IntentDataset(train_rows, tokenizer, data_args.max_length),
        eval_dataset=IntentDataset(eval_rows, tokenizer, data_args.max_length),
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
        callbacks=[ThroughputCallback()],
    )
    train_result = trainer.train()
    metrics = trainer.evaluate()
    trainer.log_metrics("eval", metrics)
    if trainer.is_world_process_zero():
        trainer.save_model(str(out / "final"))
        (out / "final" / "run_summary.json").write_text(json.dumps(
            {"train_loss": train_result.training_loss, **metrics, "launch_env": exported}, indent=1))
    trainer.accelerator.wait_for_everyone()
    if dist.is_initialized():
        dist.destroy_process_group()
    say("done")


if __name__ == "__main__":
    main()
