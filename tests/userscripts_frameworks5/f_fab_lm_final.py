"""GPT-2-style LM on synthetic token streams with Lightning Fabric (DDP, gloo).
After training, rank 0 writes the final checkpoint (model + optimizer + EMA weights) and
every rank reloads it to run the distributed test pass from exactly what was shipped."""
import os
import time
from datetime import timedelta

import torch
from torch.utils.data import DataLoader, Dataset
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = 16000
BLOCK = 32
CKPT = os.path.join("checkpoints", "final.ckpt")


class MarkovTokens(Dataset):
    """Token sequences from a sparse random Markov chain (learnable next-token structure)."""
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.next = torch.randint(0, VOCAB, (VOCAB, 4), generator=torch.Generator().manual_seed(0))
        start = torch.randint(0, VOCAB, (n,), generator=g)
        choice = torch.randint(0, 4, (n, BLOCK), generator=g)
        seqs = torch.empty(n, BLOCK, dtype=torch.long)
        seqs[:, 0] = start
        for t in range(1, BLOCK):
            seqs[:, t] = self.next[seqs[:, t - 1], choice[:, t]]
        self.seqs = seqs

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        return self.seqs[i]


def main():
    fabric = Fabric(accelerator="cpu", devices=2,
                    strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)))
    fabric.launch()
    fabric.seed_everything(0)

    cfg = GPT2Config(vocab_size=VOCAB, n_positions=BLOCK, n_embd=512, n_layer=2, n_head=8)
    model = GPT2LMHeadModel(cfg)
    ema = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = fabric.setup(model, optimizer)
    train = fabric.setup_dataloaders(DataLoader(MarkovTokens(640, seed=1), batch_size=8, shuffle=True))
    test = fabric.setup_dataloaders(DataLoader(MarkovTokens(128, seed=2), batch_size=16))

    model.train()
    for step, seqs in enumerate(train):
        loss = model(input_ids=seqs, labels=seqs).loss
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            for k, v in model.module.state_dict().items():
                if v.dtype.is_floating_point:
                    ema[k].mul_(0.9).add_(v, alpha=0.1)
        if step % 10 == 0:
            fabric.print(f"step {step} loss {loss.item():.3f}")

    if fabric.is_global_zero:
        os.makedirs(os.path.dirname(CKPT), exist_ok=True)
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "ema": ema, "steps": step + 1}, CKPT)
    else:
        # poll instead of fabric.barrier(): writing a big checkpoint can outlast the group timeout
        while not os.path.exists(CKPT):
            time.sleep(0.01)

    ckpt = fabric.load(CKPT)
    model.module.load_state_dict(ckpt["ema"])
    model.eval()
    total = torch.zeros(2)
    with torch.no_grad():
        for seqs in test:
            total += torch.tensor([model(input_ids=seqs, labels=seqs).loss.item() * len(seqs), len(seqs)])
    total = fabric.all_reduce(total, reduce_op="sum")
    fabric.print(f"test loss of shipped EMA weights: {(total[0] / total[1]).item():.3f}")


if __name__ == "__main__":
    main()
