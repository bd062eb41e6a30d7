"""Matrix-factorisation recommender trained with Lightning Fabric (CPU, DDP/gloo).

Fabric sets up the model, optimizer and dataloaders; validation RMSE is
all-reduced across ranks, the run config is broadcast from rank 0, and the
final checkpoint (embeddings + Adam state, tens of MB) is written gzip-
compressed by rank 0.  Every rank then reloads that checkpoint and exports
its share of the item-neighbour table, gathered with fabric.all_gather.

    torchrun --nproc-per-node 2 fabric_ckpt_race.py
"""
import gzip
import json
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fw3_common import arm_hang_watchdog, fresh_outdir, say

NAME = "fabric_ckpt_race"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
N_USERS, N_ITEMS, DIM = 30000, 6000, 64


class MatrixFactorization(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(N_USERS, DIM)
        self.item = nn.Embedding(N_ITEMS, DIM)
        self.user_bias = nn.Embedding(N_USERS, 1)
        self.item_bias = nn.Embedding(N_ITEMS, 1)
        for emb in (self.user, self.item):
            nn.init.normal_(emb.weight, std=0.1)
        nn.init.zeros_(self.user_bias.weight)
        nn.init.zeros_(self.item_bias.weight)

    def forward(self, u, i):
        dot = (self.user(u) * self.item(i)).sum(-1)
        return dot + self.user_bias(u).squeeze(-1) + self.item_bias(i).squeeze(-1) + 3.5


def synthetic_ratings(n, seed):
    g = torch.Generator().manual_seed(seed)
    tu, ti = torch.randn(N_USERS, 8, generator=g), torch.randn(N_ITEMS, 8, generator=g)
    u = torch.randint(0, N_USERS, (n,), generator=g)
    i = torch.randint(0, N_ITEMS, (n,), generator=g)
    r = (3.5 + 0.5 * (tu[u] * ti[i]).sum(-1) + 0.3 * torch.randn(n, generator=g)).clamp(1, 5)
    return TensorDataset(u, i, r)


def main():
    t0 = time.time()
    fabric = Fabric(accelerator="cpu", devices=2,
                    strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"))
    fabric.launch()
    fabric.seed_everything(7)
    run_cfg = fabric.broadcast({"epochs": 2, "lr": 0.02, "batch_size": 512, "topk": 5} if fabric.is_global_zero
                               else None)

    model = MatrixFactorization()
    optimizer = torch.optim.Adam(model.parameters(), lr=run_cfg["lr"])
    model, optimizer = fabric.setup(model, optimizer)
    train_dl = DataLoader(synthetic_ratings(16384, 0), batch_size=run_cfg["batch_size"], shuffle=True)
    val_dl = DataLoader(synthetic_ratings(4096, 1), batch_size=1024)
    train_dl, val_dl = fabric.setup_dataloaders(train_dl, val_dl)

    for epoch in range(run_cfg["epochs"]):
        model.train()
        for u, i, r in train_dl:
            loss = F.mse_loss(model(u, i), r)
            optimizer.zero_grad()
            fabric.backward(loss)
            optimizer.step()
        model.eval()
        se, n = torch.zeros(()), torch.zeros(())
        with torch.no_grad():
            for u, i, r in val_dl:
                se += ((model(u, i) - r) ** 2).sum()
                n += len(r)
        se, n = fabric.all_reduce(se, reduce_op="sum"), fabric.all_reduce(n, reduce_op="sum")
        fabric.print(f"epoch {epoch}: train_mse={loss.item():.3f} val_rmse={(se / n).sqrt().item():.3f}")

    # final checkpoint: tens of MB, so rank 0 writes it gzip-compressed
    ckpt_path = OUT / "final.pt.gz"
    if fabric.is_global_zero:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": run_cfg["epochs"]}
        with gzip.open(ckpt_path, "wb") as f:
            torch.save(state, f)
        say(f"wrote {ckpt_path} ({ckpt_path.stat().st_size / 2**20:.1f} MiB)")
    else:
        # wait until rank 0 has started writing the checkpoint
        while not ckpt_path.exists() or ckpt_path.stat().st_size == 0:
            time.sleep(0.5)

    # every rank reloads the saved weights and exports its share of the neighbour table
    with gzip.open(ckpt_path, "rb") as f:
        state = torch.load(f, map_location="cpu")
    model.load_state_dict(state["model"])
    items = model.module.item.weight.detach() if hasattr(model, "module") else model.item.weight.detach()
    mine = torch.arange(fabric.global_rank, 64, fabric.world_size)
    sims = F.normalize(items[mine], dim=-1) @ F.normalize(items, dim=-1).T
    neighbours = sims.topk(run_cfg["topk"] + 1, dim=-1).indices[:, 1:]
    table = fabric.all_gather(neighbours)
    if fabric.is_global_zero:
        (OUT / "neighbours.json").write_text(json.dumps(table.tolist()))
    fabric.barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
