"""Tiny causal LM pre-training with a fixed *token* budget per optimizer update.

Sequences have very different lengths, so accumulating a fixed number of micro-batches
gives a noisy effective batch size. Instead we accumulate micro-batches until
`tokens_per_update` real (non-pad) tokens have been seen, and only then sync + step.
Micro-batches before the boundary run under DDP.no_sync() to skip the all-reduce.
"""
import argparse
import contextlib
import math
import os
import time
from dataclasses import MISSING, dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

@dataclass
class TrainingArguments:
    vocab_size: int = 256
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    max_len: int = 128
    num_samples: int = 1024
    micro_batch_size: int = 8
    tokens_per_update: int = 2048
    learning_rate: float = 1e-3
    warmup_updates: int = 5
    num_epochs: int = 2
    seed: int = 42
    pg_timeout: int = 10
    output_dir: str = field(default_factory=lambda: os.path.join(os.path.dirname(os.path.abspath(__file__)), "out_lm"))


def parse_args() -> TrainingArguments:
    p = argparse.ArgumentParser()
    for name, f in TrainingArguments.__dataclass_fields__.items():
        default = f.default if f.default is not MISSING else f.default_factory()
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return TrainingArguments(**vars(p.parse_args()))


class MixedCorpus(Dataset):
    """Synthetic corpus from two sources: long 'book' passages and short 'chat' turns.

    The sources are interleaved document by document (book, chat, book, chat, ...) so that
    consecutive samples already mix both sources; no need to shuffle on top of that.
    """

    def __init__(self, n, vocab, max_len, seed):
        g = torch.Generator().manual_seed(seed)
        books = [self._doc(int(torch.randint(max_len // 2, max_len + 1, (1,), generator=g)), vocab, g)
                 for _ in range(n // 2)]
        chats = [self._doc(int(torch.randint(6, 24, (1,), generator=g)), vocab, g)
                 for _ in range(n // 2)]
        self.docs = [d for pair in zip(books, chats) for d in pair]

    @staticmethod
    def _doc(L, vocab, g):
        period = int(torch.randint(2, 6, (1,), generator=g))
        base = torch.randint(1, vocab, (period,), generator=g)
        return base.repeat(L // period + 1)[:L]

    def __len__(self):
        return len(self.docs)

    def __getitem__(self, i):
        return self.docs[i]


def collate(batch, pad_id=0):
    L = max(len(d) for d in batch)
    ids = torch.full((len(batch), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), L), dtype=torch.long)
    for i, d in enumerate(batch):
        ids[i, : len(d)] = d
        mask[i, : len(d)] = 1
    return {"input_ids": ids, "attention_mask": mask}


class TinyLM(nn.Module):
    def __init__(self, a: TrainingArguments):
        super().__init__()
        self.tok = nn.Embedding(a.vocab_size, a.d_model)
        self.pos = nn.Embedding(a.max_len, a.d_model)
        layer = nn.TransformerEncoderLayer(a.d_model, a.n_heads, 4 * a.d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, a.n_layers)
        self.lm_head = nn.Linear(a.d_model, a.vocab_size)

    def forward(self, ids, mask):
        T = ids.size(1)
        h = self.tok(ids) + self.pos(torch.arange(T))[None]
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        h = self.encoder(h, mask=causal, src_key_padding_mask=mask == 0)
        return self.lm_head(h)


def lm_loss(logits, ids, mask):
    tgt = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), tgt.reshape(-1),
                           ignore_index=-100, reduction="sum")


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    ds = MixedCorpus(args.num_samples, args.vocab_size, args.max_len, seed=args.seed)
    sampler = DistributedSampler(ds, shuffle=False)  # corpus is pre-mixed
    loader = DataLoader(ds, batch_size=args.micro_batch_size, sampler=sampler, collate_fn=collate)

    model = DDP(TinyLM(args))
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda u: min(1.0, (u + 1) / args.warmup_updates))

    update = 0
    for epoch in range(args.num_epochs):
        sampler.set_epoch(epoch)
        model.train()
        pending_tokens, pending_loss, micro = 0, 0.0, 0
        t0 = time.time()
        for batch in loader:
            ids, mask = batch["input_ids"], batch["attention_mask"]
            n_tok = int(mask[:, 1:].sum())
            pending_tokens += n_tok
            sync_now = pending_tokens >= args.tokens_per_update
            ctx = contextlib.nullcontext() if sync_now else model.no_sync()
            with ctx:
                loss_sum = lm_loss(model(ids, mask), ids, mask)
                # normalise by the token budget so every update has the same scale
                (loss_sum / args.tokens_per_update).backward()
            pending_loss += loss_sum.item()
            micro += 1
            if sync_now:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                update += 1
                if rank == 0 and update % 5 == 0:
                    print(f"epoch {epoch} update {update} micro {micro} "
                          f"loss/tok {pending_loss / pending_tokens:.4f} lr {sched.get_last_lr()[0]:.2e}",
                          flush=True)
                pending_tokens, pending_loss = 0, 0.0

        # leftover micro-batches at the end of the epoch: drop their gradients
        opt.zero_grad(set_to_none=True)

        # epoch summary: mean loss per token over all ranks
        model.eval()
        tot = torch.zeros(2)
        with torch.no_grad():
            for i, batch in enumerate(loader):
                if i == 8:
                    break
                ids, mask = batch["input_ids"], batch["attention_mask"]
                tot[0] += lm_loss(model.module(ids, mask), ids, mask)
                tot[1] += mask[:, 1:].sum()
        dist.all_reduce(tot)
        if rank == 0:
            ppl = math.exp(tot[0] / tot[1])
            print(f"== epoch {epoch} done in {time.time() - t0:.1f}s, updates {update}, ppl {ppl:.2f}", flush=True)

    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        torch.save(model.module.state_dict(), os.path.join(args.output_dir, "lm.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
