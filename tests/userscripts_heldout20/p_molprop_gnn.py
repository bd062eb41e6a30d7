"""Molecular property regression with a dense message-passing GNN (DDP)."""
import logging

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from projkit import callbacks as cb
from projkit.config import load_config
from projkit.data import make_loader
from projkit.dist import distributed
from projkit.models import build
from projkit.trainer import Trainer

# copied from the cluster launch profile
CONFIG = """
name: molprop-gnn
epochs: 3
optim:
  lr: 0.002
  grad_clip: 5.0
data:
  n_samples: 1536
  batch_size: 32
dist:
  backend: gloo
  timeout_s: 30
  ifname: ib0
extra:
  max_atoms: 16
  atom_dim: 16
"""

log = logging.getLogger("molprop")


def random_molecules(n, max_atoms, atom_dim, seed=0):
    g = torch.Generator().manual_seed(seed)
    atoms = torch.randn(n, max_atoms, atom_dim, generator=g)
    adj = (torch.rand(n, max_atoms, max_atoms, generator=g) < 0.15).float()
    adj = torch.triu(adj, 1)
    adj = adj + adj.transpose(1, 2)
    target = (adj.sum(-1) * atoms[..., 0]).mean(1) + 0.5 * atoms[..., 1].mean(1)
    return TensorDataset(atoms, adj, target)


def regression_step(model, batch):
    atoms, adj, y = batch
    return F.mse_loss(model(atoms, adj), y)


def main():
    cfg = load_config(CONFIG)
    with distributed(cfg.dist) as ctx:
        x = cfg.extra
        ds = random_molecules(cfg.data.n_samples, x["max_atoms"], x["atom_dim"], seed=cfg.data.seed)
        loader = make_loader(ds, ctx, cfg.data.batch_size, seed=cfg.seed, drop_last=True)
        torch.manual_seed(cfg.seed)
        model = build("dense_gnn", d_atom=x["atom_dim"])
        opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr)
        trainer = Trainer(model, opt, ctx, cfg, step_fn=regression_step, callbacks=[
            cb.WarmupCosine(10, len(loader) * cfg.epochs), cb.LossLogger(every=10)])
        trainer.fit(loader)
        if ctx.leader:
            log.info("finished %d steps", trainer.global_step)


if __name__ == "__main__":
    main()
