"""Small LM trained with Lightning Fabric on a memory-mapped token cache (the usual
"tokenise once to a flat .bin file" pipeline).  Curriculum: the first epoch uses every
document, later epochs only the long ones."""
import os
from datetime import timedelta

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = 512
BLOCK = 64
CACHE = os.path.join("cache", "tokens.bin")


def synthetic_documents(seed=0, n_docs=3000):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, 400, n_docs)
    # each document repeats a short random motif with noise: learnable but not trivial
    docs = []
    for n in lengths:
        motif = rng.integers(3, VOCAB, rng.integers(4, 12))
        doc = np.resize(motif, n)
        noise = rng.random(n) < 0.1
        doc[noise] = rng.integers(3, VOCAB, noise.sum())
        docs.append(np.concatenate([[1], doc, [2]]).astype(np.int32))
    return docs


def build_cache(path, min_len):
    docs = [d for d in synthetic_documents() if len(d) >= min_len]
    total = sum(len(d) for d in docs)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    arr = np.memmap(path, dtype=np.int32, mode="w+", shape=(total,))
    pos = 0
    for d in docs:
        arr[pos:pos + len(d)] = d
        pos += len(d)
    arr.flush()
    return arr


class TokenWindows(Dataset):
    def __init__(self, path):
        self.tokens = np.memmap(path, dtype=np.int32, mode="r")

    def __len__(self):
        return (len(self.tokens) - 1) // BLOCK

    def __getitem__(self, i):
        chunk = np.asarray(self.tokens[i * BLOCK:(i + 1) * BLOCK], dtype=np.int64)
        return torch.from_numpy(chunk)


def main():
    fabric = Fabric(accelerator="cpu", devices=2,
                    strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)))
    fabric.launch()
    fabric.seed_everything(0)

    if fabric.is_global_zero:
        build_cache(CACHE, min_len=0)
    fabric.barrier()
    dataset = TokenWindows(CACHE)

    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=BLOCK, n_embd=64, n_layer=2, n_head=2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    model, optimizer = fabric.setup(model, optimizer)

    for epoch in range(3):
        if epoch == 1 and fabric.is_global_zero:
            # curriculum stage 2: keep only long documents, rewrite the cache in place
            dataset.tokens = build_cache(CACHE, min_len=200)
        fabric.barrier()
        loader = fabric.setup_dataloaders(DataLoader(dataset, batch_size=16, shuffle=True, num_workers=0))
        model.train()
        for step, x in enumerate(loader):
            loss = model(input_ids=x, labels=x).loss
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            if step == 30:
                break
        avg = fabric.all_reduce(loss.detach(), reduce_op="mean")
        fabric.print(f"epoch {epoch}: {len(dataset)} windows, loss {avg.item():.3f}")

    fabric.save("lm_final.ckpt", {"model": model, "optimizer": optimizer})


if __name__ == "__main__":
    main()
