"""Resumable DDP training: each rank keeps a small state file next to the checkpoints
(epoch, world size, data-order seed) so a restarted job continues exactly where it stopped."""
import argparse
import json
import os
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class RunState:
    epoch: int = 0
    world_size: int = 1
    seed: int = 0


class CheckpointManager:
    def __init__(self, root: str, rank: int):
        self.root, self.rank = root, rank
        os.makedirs(os.path.join(root, "state"), exist_ok=True)

    @property
    def state_file(self):
        return os.path.join(self.root, "state", f"rank{self.rank}.json")

    @property
    def model_file(self):
        return os.path.join(self.root, "model.pt")

    def load_state(self, default: RunState) -> RunState:
        if os.path.exists(self.state_file):
            with open(self.state_file) as fh:
                return RunState(**{**asdict(default), **json.load(fh)})
        return default

    def save(self, state: RunState, model: nn.Module):
        with open(self.state_file, "w") as fh:
            json.dump(asdict(state), fh)
        if self.rank == 0:
            torch.save(model.state_dict(), self.model_file)

    def load_model(self, model: nn.Module):
        if os.path.exists(self.model_file):
            model.load_state_dict(torch.load(self.model_file))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-dir", default=os.path.join(HERE, "checkpoints", "train_resume_state"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    rank = int(os.environ["RANK"])
    ckpt = CheckpointManager(args.ckpt_dir, rank)
    state = ckpt.load_state(RunState(world_size=int(os.environ["WORLD_SIZE"]), seed=args.seed))
    print(f"rank {rank}: starting at epoch {state.epoch} (world size {state.world_size}, seed {state.seed})", flush=True)

    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=state.world_size,
                            timeout=timedelta(seconds=args.pg_timeout))

    torch.manual_seed(state.seed)
    x = torch.randn(2048, 20)
    y = torch.sin(x[:, :1]) + 0.05 * torch.randn(2048, 1)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, seed=state.seed)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler)

    net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 1))
    ckpt.load_model(net)
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(state.epoch, args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.mse_loss(model(xb), yb).backward()
            opt.step()
        print(f"rank {rank}: Epoch {epoch} | Steps: {len(loader)}", flush=True)
        state.epoch = epoch + 1
        ckpt.save(state, net)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
