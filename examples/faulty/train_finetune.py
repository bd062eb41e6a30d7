"""Fine-tune a pretrained regressor with DDP on CPU (gloo).  Based on the ddp-tutorial-series Trainer."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group

HERE = os.path.dirname(os.path.abspath(__file__))


class MyTrainDataset(Dataset):
    def __init__(self, size):
        g = torch.Generator().manual_seed(42)
        self.x = torch.rand(size, 20, generator=g)
        self.y = self.x.sum(1, keepdim=True) / 10

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


def build_model():
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


def ddp_setup(pg_timeout):
    init_process_group(backend="gloo", timeout=timedelta(seconds=pg_timeout))


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path, init_from=None):
        self.global_rank = int(os.environ["RANK"])
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.model = DDP(model)
        if init_from:
            self._load_pretrained(init_from)

    def _load_pretrained(self, path):
        # read the file once on rank 0 and send the weights to the other ranks
        if self.global_rank == 0:
            state = torch.load(path, map_location="cpu")
            missing, unexpected = self.model.module.load_state_dict(state, strict=False)
            print(f"Loaded pretrained weights from {path} (missing={missing}, unexpected={unexpected})")
            for p in self.model.module.parameters():
                dist.broadcast(p.data, src=0)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        losses = [self._run_batch(s, t) for s, t in self.train_data]
        print(f"[RANK{self.global_rank}] Epoch {epoch} | Steps: {len(self.train_data)} | loss {sum(losses) / len(losses):.5f}")

    def _save_snapshot(self, epoch):
        torch.save({"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if self.global_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main(args):
    ddp_setup(args.pg_timeout)
    dataset = MyTrainDataset(2048)
    train_data = DataLoader(dataset, batch_size=args.batch_size, shuffle=False, sampler=DistributedSampler(dataset))
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    trainer = Trainer(model, train_data, optimizer, args.save_every, args.snapshot_path, args.init_from)
    trainer.train(args.total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="fine-tuning job")
    parser.add_argument("total_epochs", type=int, nargs="?", default=3)
    parser.add_argument("save_every", type=int, nargs="?", default=1)
    parser.add_argument("--batch_size", default=32, type=int)
    parser.add_argument("--init_from", default=os.path.join(HERE, "checkpoints", "pretrained", "regressor.pt"))
    parser.add_argument("--snapshot_path", default=os.path.join(HERE, "checkpoints", "train_finetune", "snapshot.pt"))
    parser.add_argument("--pg-timeout", type=int, default=10)
    args = parser.parse_args()
    os.makedirs(os.path.dirname(args.snapshot_path), exist_ok=True)
    main(args)
