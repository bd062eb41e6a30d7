"""Fine-tune a small text-classification MLP, HF-Trainer-like arguments.

Usage:
    torchrun --nproc-per-node 2 cfg_main_only.py [--config-file configs/finetune.json]
"""
import argparse
import dataclasses
import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger("finetune")


@dataclass
class ModelArguments:
    vocab_size: int = 2000
    embed_dim: int = 64
    hidden_size: int = 128
    num_layers: int = 2
    num_labels: int = 4
    dropout: float = 0.1


@dataclass
class TrainingArguments:
    output_dir: str = "outputs/finetune"
    config_file: str = "configs/finetune.json"
    per_device_train_batch_size: int = 32
    learning_rate: float = 3e-4
    weight_decay: float = 0.01
    num_train_epochs: int = 3
    warmup_ratio: float = 0.1
    logging_steps: int = 10
    seed: int = 42
    pg_timeout: int = 10
    extra: dict = field(default_factory=dict)


def parse_args():
    parser = argparse.ArgumentParser()
    for dc in (ModelArguments, TrainingArguments):
        for f in dataclasses.fields(dc):
            if f.type is dict or f.type == "dict":
                continue
            flag = "--" + f.name.replace("_", "-")
            parser.add_argument(flag, dest=f.name, type=type(f.default), default=f.default)
    ns = vars(parser.parse_args())
    margs = ModelArguments(**{k: ns[k] for k in ModelArguments.__dataclass_fields__})
    targs = TrainingArguments(**{k: ns[k] for k in TrainingArguments.__dataclass_fields__ if k in ns})
    return margs, targs


def is_main_process():
    return not dist.is_initialized() or dist.get_rank() == 0


class BagOfWordsClassifier(nn.Module):
    def __init__(self, cfg: ModelArguments):
        super().__init__()
        self.embed = nn.EmbeddingBag(cfg.vocab_size, cfg.embed_dim, mode="mean")
        layers, d = [], cfg.embed_dim
        for _ in range(cfg.num_layers):
            layers += [nn.Linear(d, cfg.hidden_size), nn.GELU(), nn.Dropout(cfg.dropout)]
            d = cfg.hidden_size
        self.encoder = nn.Sequential(*layers)
        self.classifier = nn.Linear(d, cfg.num_labels)

    def forward(self, input_ids):
        return self.classifier(self.encoder(self.embed(input_ids)))


def make_dataset(cfg: ModelArguments, n=4096, seq_len=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, cfg.num_labels, (n,), generator=g)
    ids = torch.randint(0, cfg.vocab_size, (n, seq_len), generator=g)
    # make the task learnable: each label has a few marker tokens
    markers = labels.unsqueeze(1) * 10 + torch.randint(0, 10, (n, 4), generator=g)
    ids[:, :4] = markers
    return TensorDataset(ids, labels)


def build_optimizer(model, targs):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "bias" in name else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": targs.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=targs.learning_rate)


def linear_warmup(optimizer, warmup, total):
    def fn(step):
        if step < warmup:
            return (step + 1) / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, fn)


def main():
    model_args, training_args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=training_args.pg_timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(
        level=logging.INFO if is_main_process() else logging.WARNING,
        format=f"%(asctime)s [rank{rank}] %(levelname)s %(message)s",
    )
    torch.manual_seed(training_args.seed)

    if is_main_process():
        os.makedirs(training_args.output_dir, exist_ok=True)
        if training_args.config_file and os.path.exists(training_args.config_file):
            with open(training_args.config_file) as fh:
                overrides = json.load(fh)
            for key, value in overrides.get("model", {}).items():
                setattr(model_args, key, value)
            for key, value in overrides.get("training", {}).items():
                setattr(training_args, key, value)
            logger.info("loaded overrides from %s", training_args.config_file)
        with open(os.path.join(training_args.output_dir, "run_config.json"), "w") as fh:
            json.dump({"model": asdict(model_args), "training": asdict(training_args)}, fh, indent=2)
        logger.info("model config: %s", asdict(model_args))

    dataset = make_dataset(model_args)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=training_args.seed)
    loader = DataLoader(dataset, batch_size=training_args.per_device_train_batch_size,
                        sampler=sampler, drop_last=True)

    model = BagOfWordsClassifier(model_args)
    model = DDP(model)
    optimizer = build_optimizer(model, training_args)
    total_steps = len(loader) * training_args.num_train_epochs
    scheduler = linear_warmup(optimizer, int(training_args.warmup_ratio * total_steps), total_steps)

    step = 0
    for epoch in range(training_args.num_train_epochs):
        sampler.set_epoch(epoch)
        model.train()
        t0 = time.time()
        running = torch.zeros(2)
        for input_ids, labels in loader:
            logits = model(input_ids)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            running += torch.tensor([loss.item(), (logits.argmax(-1) == labels).float().mean().item()])
            if step % training_args.logging_steps == 0:
                stats = running / training_args.logging_steps
                dist.all_reduce(stats)
                stats /= world_size
                running.zero_()
                logger.info("epoch %d step %d loss %.4f acc %.3f lr %.2e", epoch, step,
                            stats[0].item(), stats[1].item(), scheduler.get_last_lr()[0])
        logger.info("epoch %d done in %.1fs", epoch, time.time() - t0)

    if is_main_process():
        torch.save(model.module.state_dict(), os.path.join(training_args.output_dir, "model.pt"))
        logger.info("saved model to %s", training_args.output_dir)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
