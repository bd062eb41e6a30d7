"""Multi-task encoder: intent classification + answer-span extraction.

Lightning-style module with a small hand-written DDP loop (we dropped PL because
of the version pinning on the cluster).  Gradient accumulation via no_sync().

    torchrun --nproc-per-node 2 mtl_accum.py
"""
import argparse
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--accumulate-grad-batches", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--span-weight", type=float, default=0.5)
    p.add_argument("--num-examples", type=int, default=2048)
    p.add_argument("--seq-len", type=int, default=48)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


class QADataset(Dataset):
    """Synthetic stand-in for our intent/QA dump: every utterance has an intent,
    only the ones annotated by the QA team carry an answer span."""

    VOCAB = 1000
    N_INTENTS = 6

    def __init__(self, n, seq_len, seed):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(5, self.VOCAB, (n, seq_len), generator=g)
        self.intent = torch.randint(0, self.N_INTENTS, (n,), generator=g)
        # ~12% of the dump went through span annotation
        self.has_span = torch.rand(n, generator=g) < 0.12
        start = torch.randint(0, seq_len - 6, (n,), generator=g)
        length = torch.randint(1, 6, (n,), generator=g)
        self.span_start = torch.where(self.has_span, start, torch.full_like(start, -1))
        self.span_end = torch.where(self.has_span, start + length, torch.full_like(start, -1))
        # make the intent/span learnable-ish
        self.tokens[:, 0] = self.intent + 1
        self.tokens[self.has_span, 1] = 4

    def __len__(self):
        return self.tokens.size(0)

    def __getitem__(self, i):
        return {
            "input_ids": self.tokens[i],
            "intent": self.intent[i],
            "has_span": self.has_span[i],
            "span_start": self.span_start[i],
            "span_end": self.span_end[i],
        }


class IntentSpanModule(nn.Module):
    """LightningModule-like: forward() computes the training loss."""

    def __init__(self, vocab, n_intents, d_model=128, nhead=4, layers=2, span_weight=0.5):
        super().__init__()
        self.span_weight = span_weight
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, 512, d_model))
        enc_layer = nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc_layer, layers)
        self.intent_head = nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh(), nn.Linear(d_model, n_intents))
        self.span_head = nn.Linear(d_model, 2)

    def encode(self, input_ids):
        h = self.embed(input_ids) + self.pos[:, : input_ids.size(1)]
        return self.encoder(h)

    def forward(self, batch):
        h = self.encode(batch["input_ids"])
        intent_logits = self.intent_head(h[:, 0])
        loss = F.cross_entropy(intent_logits, batch["intent"])
        logs = {"intent_loss": loss.detach()}

        mask = batch["has_span"]
        if mask.any():  # cross_entropy over an empty selection gives NaN
            span_logits = self.span_head(h[mask])
            start_logits, end_logits = span_logits.unbind(-1)
            span_loss = 0.5 * (
                F.cross_entropy(start_logits, batch["span_start"][mask])
                + F.cross_entropy(end_logits, batch["span_end"][mask].clamp(max=h.size(1) - 1))
            )
            loss = loss + self.span_weight * span_loss
            logs["span_loss"] = span_loss.detach()
        logs["acc"] = (intent_logits.argmax(-1) == batch["intent"]).float().mean()
        return loss, logs

    def configure_optimizers(self, lr, total_steps):
        decay, no_decay = [], []
        for n, p in self.named_parameters():
            (no_decay if p.ndim < 2 or "norm" in n else decay).append(p)
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=lr)
        warmup = max(1, total_steps // 10)

        def lr_lambda(step):
            if step < warmup:
                return (step + 1) / warmup
            return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total_steps - warmup)))

        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)


def main():
    args = get_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    ds = QADataset(args.num_examples, args.seq_len, seed=args.seed)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(ds, batch_size=args.micro_batch, sampler=sampler, num_workers=0, drop_last=True)

    lit = IntentSpanModule(QADataset.VOCAB, QADataset.N_INTENTS, span_weight=args.span_weight)
    model = DDP(lit)
    accum = args.accumulate_grad_batches
    steps_per_epoch = len(loader) // accum
    optimizer, scheduler = lit.configure_optimizers(args.lr, steps_per_epoch * args.epochs)
    if rank == 0:
        n_params = sum(p.numel() for p in lit.parameters())
        print(f"[rank0] params={n_params/1e6:.2f}M micro_batch={args.micro_batch} accum={accum} "
              f"world={world} -> global batch {args.micro_batch * accum * world}", flush=True)

    global_step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        t0 = time.time()
        running = torch.zeros(3)  # loss, acc, count
        for i, batch in enumerate(loader):
            is_sync_step = (i + 1) % accum == 0
            if not is_sync_step:
                with model.no_sync():
                    loss, logs = model(batch)
                    (loss / accum).backward()
            else:
                loss, logs = model(batch)
                (loss / accum).backward()
                torch.nn.utils.clip_grad_norm_(lit.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                global_step += 1
            running += torch.tensor([loss.item(), logs["acc"].item(), 1.0])
            if is_sync_step and global_step % 10 == 0 and rank == 0:
                print(f"[rank0] epoch {epoch} step {global_step} loss {running[0] / running[2]:.4f} "
                      f"acc {running[1] / running[2]:.3f} lr {scheduler.get_last_lr()[0]:.2e}", flush=True)

        dist.all_reduce(running)
        if rank == 0:
            print(f"[rank0] epoch {epoch} done in {time.time() - t0:.1f}s: loss {running[0] / running[2]:.4f} "
                  f"acc {running[1] / running[2]:.3f}", flush=True)

    if rank == 0:
        os.makedirs("checkpoints", exist_ok=True)
        torch.save(lit.state_dict(), "checkpoints/intent_span.pt")
        print("[rank0] saved checkpoints/intent_span.pt", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
