"""FSDP2 fine-tune -> DCP checkpoint -> reload in a fresh process state -> sharded evaluation.

HF-style arguments dataclass. Run: torchrun --nproc-per-node 2 fsdp_dcp_eval.py --max_steps 60
"""
import argparse
import dataclasses
import gc
import json
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainingArguments:
    output_dir: str = field(default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "outputs"))
    max_steps: int = 60
    per_device_train_batch_size: int = 32
    per_device_eval_batch_size: int = 64
    learning_rate: float = 1e-3
    warmup_steps: int = 6
    save_steps: int = 30
    num_train_samples: int = 3000
    num_eval_samples: int = 501          # deliberately odd: DistributedSampler pads the last shard
    seed: int = 42
    pg_timeout: int = 10
    logging_steps: int = 10


def parse_dataclass(cls):
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        p.add_argument(f"--{f.name}", f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return cls(**vars(p.parse_args()))


class ToySequenceDataset(Dataset):
    """Bag-of-tokens classification: label = which of 4 token ranges is most frequent."""

    def __init__(self, n, vocab=256, length=24, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, vocab, (n, length), generator=g)
        self.labels = torch.bucketize(self.tokens, torch.tensor([64, 128, 192])).mode(dim=1).values

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"idx": i, "input_ids": self.tokens[i], "labels": self.labels[i]}


class BagClassifier(nn.Module):
    def __init__(self, vocab=256, dim=64, n_classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * 2), nn.GELU(),
                                                   nn.Linear(dim * 2, dim)) for _ in range(2)])
        self.head = nn.Linear(dim, n_classes)

    def forward(self, input_ids):
        h = self.embed(input_ids).mean(1)
        for blk in self.blocks:
            h = h + blk(h)
        return self.head(h)


def build(args):
    torch.manual_seed(args.seed)
    model = BagClassifier()
    for blk in model.blocks:
        fully_shard(blk)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    return model, opt


def save_checkpoint(model, opt, step, path):
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd, "step": torch.tensor(step)}, checkpoint_id=path)


def load_checkpoint(model, opt, path):
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd, "step": torch.tensor(0)}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(state["step"])


@torch.no_grad()
def evaluate(model, ds, args, world):
    sampler = DistributedSampler(ds, shuffle=False)          # pads to a multiple of world size
    loader = DataLoader(ds, batch_size=args.per_device_eval_batch_size, sampler=sampler)
    model.eval()
    idx_l, pred_l = [], []
    for batch in loader:
        idx_l.append(batch["idx"])
        pred_l.append(model(batch["input_ids"]).argmax(-1))
    idx, pred = torch.cat(idx_l), torch.cat(pred_l)
    all_idx = [torch.empty_like(idx) for _ in range(world)]
    all_pred = [torch.empty_like(pred) for _ in range(world)]
    dist.all_gather(all_idx, idx)
    dist.all_gather(all_pred, pred)
    merged = {}
    for i_t, p_t in zip(all_idx, all_pred):
        for i, p in zip(i_t.tolist(), p_t.tolist()):
            merged[i] = p                                    # padded duplicates collapse here
    correct = sum(int(p == int(ds.labels[i])) for i, p in merged.items())
    return {"eval_accuracy": correct / len(merged), "eval_samples": len(merged)}


def main():
    args = parse_dataclass(TrainingArguments)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    train_ds = ToySequenceDataset(args.num_train_samples, seed=1)
    eval_ds = ToySequenceDataset(args.num_eval_samples, seed=2)

    model, opt = build(args)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / args.warmup_steps))
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, sampler=sampler, drop_last=True)

    step, epoch, t0 = 0, 0, time.time()
    ckpt_path = None
    while step < args.max_steps:
        sampler.set_epoch(epoch)
        model.train()
        for batch in loader:
            loss = F.cross_entropy(model(batch["input_ids"]), batch["labels"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if step % args.logging_steps == 0:
                l = loss.detach().clone()
                dist.all_reduce(l, op=dist.ReduceOp.AVG)
                if rank == 0:
                    print(f"step {step} epoch {epoch} loss {l.item():.4f} ({time.time() - t0:.1f}s)", flush=True)
            if step % args.save_steps == 0:
                ckpt_path = os.path.join(args.output_dir, f"checkpoint-{step}")
                save_checkpoint(model, opt, step, ckpt_path)
            if step >= args.max_steps:
                break
        epoch += 1

    before = evaluate(model, eval_ds, args, world)
    del model, opt

    # fresh model/optimizer, resume from the last DCP checkpoint (as the separate eval job would)
    model, opt = build(args)
    loaded_step = load_checkpoint(model, opt, ckpt_path)
    after = evaluate(model, eval_ds, args, world)
    if rank == 0:
        print(json.dumps({"checkpoint": ckpt_path, "step": loaded_step, "before": before, "after": after}), flush=True)
        with open(os.path.join(args.output_dir, "eval_results.json"), "w") as f:
            json.dump({"step": loaded_step, **after}, f, indent=2)
    # release the sharded params (and their device mesh / process group) before tearing the group down
    del model, opt, sched
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
