"""Token tagger: Lightning-style module, hand-written loop with grad accumulation + EMA,
then distributed prediction of variable-length tag sequences gathered on rank 0.

torchrun --nproc-per-node 2 tagger_ema_eval.py
"""
import argparse
import copy
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

PAD = 0
HERE = os.path.dirname(os.path.abspath(__file__))


class ToySeqs(Dataset):
    """Sequences of 5..40 tokens; the tag of a token is its id modulo n_tags, shifted by its left neighbour."""

    def __init__(self, n, vocab, n_tags, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(5, 41, (1,), generator=g))
            tok = torch.randint(1, vocab, (length,), generator=g)
            prev = torch.cat([torch.zeros(1, dtype=torch.long), tok[:-1]])
            self.items.append((tok, (tok + prev) % n_tags))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        tok, tags = self.items[i]
        return i, tok, tags


def collate(batch):
    idx, tok, tags = zip(*batch)
    return (torch.tensor(idx), pad_sequence(tok, batch_first=True, padding_value=PAD),
            pad_sequence(tags, batch_first=True, padding_value=-100), torch.tensor([len(t) for t in tok]))


class TaggerModule(nn.Module):
    def __init__(self, vocab, n_tags, dim=64, lr=3e-3):
        super().__init__()
        self.lr = lr
        self.emb = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.conv = nn.Conv1d(dim, dim, kernel_size=3, padding=1)
        self.head = nn.Linear(2 * dim, n_tags)

    def forward(self, tok):
        e = self.emb(tok)
        c = F.relu(self.conv(e.transpose(1, 2))).transpose(1, 2)
        return self.head(torch.cat([e, c], dim=-1))

    def training_step(self, batch, model=None):
        _, tok, tags, _ = batch
        logits = (model or self)(tok)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tags.reshape(-1), ignore_index=-100)

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr)
        return opt, torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.lr, total_steps=total_steps)


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.lerp_(p, 1 - self.decay)


def gather_variable(flat, rank, world):
    """all_gather 1-D tensors of different lengths: exchange sizes, pad to the max, trim afterwards."""
    size = torch.tensor([flat.numel()])
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    max_n = int(max(s.item() for s in sizes))
    padded = torch.cat([flat, flat.new_zeros(max_n - flat.numel())])
    out = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(out, padded)
    return [o[: int(s.item())] for o, s in zip(out, sizes)]


@torch.no_grad()
def predict(model, loader, rank, world):
    ids, lens, tags = [], [], []
    for idx, tok, _, length in loader:
        pred = model(tok).argmax(-1)
        for i, n, p in zip(idx.tolist(), length.tolist(), pred):
            ids.append(i)
            lens.append(n)
            tags.append(p[:n])
    all_ids = gather_variable(torch.tensor(ids), rank, world)
    all_lens = gather_variable(torch.tensor(lens), rank, world)
    all_tags = gather_variable(torch.cat(tags), rank, world)
    merged = {}
    for r_ids, r_lens, r_tags in zip(all_ids, all_lens, all_tags):
        for i, seq in zip(r_ids.tolist(), torch.split(r_tags, r_lens.tolist())):
            merged.setdefault(i, seq.tolist())  # DistributedSampler padding repeats a few samples
    return merged


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=200)
    ap.add_argument("--n-tags", type=int, default=7)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    train_ds = ToySeqs(1500, args.vocab, args.n_tags, seed=1)
    test_ds = ToySeqs(333, args.vocab, args.n_tags, seed=2)  # odd size: the sampler pads
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, collate_fn=collate)
    test_loader = DataLoader(test_ds, batch_size=64, collate_fn=collate,
                             sampler=DistributedSampler(test_ds, shuffle=False))

    module = TaggerModule(args.vocab, args.n_tags)
    ddp = DDP(module)
    ema = EMA(module)
    steps_per_epoch = (len(train_loader) + args.accum - 1) // args.accum
    opt, sched = module.configure_optimizers(args.epochs * steps_per_epoch)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        ddp.train()
        t0, total, count = time.time(), 0.0, 0
        for step, batch in enumerate(train_loader):
            last = (step + 1) % args.accum == 0 or step + 1 == len(train_loader)
            if last:
                loss = module.training_step(batch, model=ddp)
            else:
                with ddp.no_sync():
                    loss = module.training_step(batch, model=ddp)
            (loss / args.accum).backward()
            if last:
                opt.step()
                opt.zero_grad(set_to_none=True)
                sched.step()
                ema.update(module)
            total += loss.item()
            count += 1
        avg = torch.tensor([total / count])
        dist.all_reduce(avg)
        if rank == 0:
            print(f"epoch {epoch} train loss {avg.item() / world:.4f} ({time.time() - t0:.1f}s)", flush=True)

    merged = predict(ema.shadow, test_loader, rank, world)
    if rank == 0:
        assert len(merged) == len(test_ds), (len(merged), len(test_ds))
        correct = sum(int(t == g) for i, seq in merged.items() for t, g in zip(seq, test_ds.items[i][1].tolist()))
        n_tok = sum(len(test_ds.items[i][1]) for i in merged)
        out = os.path.join(HERE, "tagger_out")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "predictions.jsonl"), "w") as f:
            for i in sorted(merged):
                f.write(json.dumps({"id": i, "tags": merged[i]}) + "\n")
        print(f"EMA token accuracy {correct / n_tok:.4f} on {len(merged)} sequences", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
