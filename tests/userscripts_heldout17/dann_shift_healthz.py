"""Domain-adversarial training (DANN) on a synthetic covariate-shift problem.

Source domain: labelled Gaussian clusters.  Target domain: the same clusters,
rotated and rescaled, unlabelled during training.  A gradient reversal layer
pushes the feature extractor towards domain-invariant features.

Each worker also serves a tiny JSON status page (step, losses, target acc)
that our cluster health-checker scrapes; a worker whose page stops answering
gets its job restarted.
"""
import json
import logging
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, asdict
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@dataclass
class Cfg:
    out: str = "/tmp/ho17_dann_healthz"
    status_port_base: int = int(os.environ.get("STATUS_PORT_BASE", 28517))
    n_per_domain: int = 3000
    n_classes: int = 5
    in_dim: int = 16
    feat_dim: int = 32
    epochs: int = 6
    batch_size: int = 64
    lr: float = 1e-3
    grl_max: float = 1.0
    seed: int = 99


log = logging.getLogger("dann")
STATUS = {"state": "starting"}


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.lam * g, None


class DANN(nn.Module):
    def __init__(self, in_dim, feat_dim, n_classes):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(in_dim, 64), nn.ReLU(), nn.Linear(64, feat_dim), nn.ReLU())
        self.label_head = nn.Linear(feat_dim, n_classes)
        self.domain_head = nn.Sequential(nn.Linear(feat_dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x, lam=0.0):
        f = self.features(x)
        return self.label_head(f), self.domain_head(GradReverse.apply(f, lam)).squeeze(-1)


def make_domains(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    centers = 3.0 * torch.randn(cfg.n_classes, cfg.in_dim, generator=g)
    y_s = torch.randint(cfg.n_classes, (cfg.n_per_domain,), generator=g)
    x_s = centers[y_s] + torch.randn(cfg.n_per_domain, cfg.in_dim, generator=g)
    q, r = torch.linalg.qr(torch.eye(cfg.in_dim) + 0.1 * torch.randn(cfg.in_dim, cfg.in_dim, generator=g))
    q = q * torch.sign(torch.diagonal(r))  # small proper rotation, no reflections
    y_t = torch.randint(cfg.n_classes, (cfg.n_per_domain,), generator=g)
    x_t = (centers[y_t] + torch.randn(cfg.n_per_domain, cfg.in_dim, generator=g)) @ q * 1.1 + 0.3
    return (x_s, y_s), (x_t, y_t)


class _StatusHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(STATUS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):  # keep stdout clean
        pass


def start_status_server(port):
    srv = ThreadingHTTPServer(("127.0.0.1", port), _StatusHandler)
    threading.Thread(target=srv.serve_forever, daemon=True, name="status").start()
    return srv


@torch.no_grad()
def target_accuracy(model, loader):
    model.eval()
    correct = torch.zeros(2)
    for x, y in loader:
        logits, _ = model(x)
        correct[0] += (logits.argmax(1) == y).sum()
        correct[1] += y.numel()
    dist.all_reduce(correct)
    model.train()
    return (correct[0] / correct[1]).item()


def main():
    cfg = Cfg()
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [{rank}] %(levelname)s %(message)s")
    if rank == 0:
        shutil.rmtree(cfg.out, ignore_errors=True)
        os.makedirs(cfg.out)
        log.info("config: %s", asdict(cfg))

    # stagger start-up so the workers on a node don't all build data at once
    time.sleep(0.5 * local_rank)
    (x_s, y_s), (x_t, y_t) = make_domains(cfg)
    src, tgt = TensorDataset(x_s, y_s), TensorDataset(x_t, y_t)

    # one status endpoint per worker process, offset by its index on the cluster
    node_rank = int(os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", 0)))
    port = cfg.status_port_base + node_rank
    server = start_status_server(port)
    log.info("status page on http://127.0.0.1:%d/", port)

    torch.manual_seed(cfg.seed)
    model = DDP(DANN(cfg.in_dim, cfg.feat_dim, cfg.n_classes))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    s_sampler = DistributedSampler(src, shuffle=True, seed=cfg.seed)
    t_sampler = DistributedSampler(tgt, shuffle=True, seed=cfg.seed + 1)
    s_dl = DataLoader(src, batch_size=cfg.batch_size, sampler=s_sampler, drop_last=True)
    t_dl = DataLoader(tgt, batch_size=cfg.batch_size, sampler=t_sampler, drop_last=True)
    t_eval = DataLoader(tgt, batch_size=512, sampler=DistributedSampler(tgt, shuffle=False))

    total = cfg.epochs * len(s_dl)
    step = 0
    for epoch in range(cfg.epochs):
        s_sampler.set_epoch(epoch)
        t_sampler.set_epoch(epoch)
        for (xs, ys), (xt, _) in zip(s_dl, t_dl):
            p = step / total
            lam = cfg.grl_max * (2.0 / (1.0 + math.exp(-10 * p)) - 1.0)
            x = torch.cat([xs, xt])
            dom = torch.cat([torch.zeros(len(xs)), torch.ones(len(xt))])
            logits, dom_logit = model(x, lam)
            cls_loss = F.cross_entropy(logits[: len(xs)], ys)
            dom_loss = F.binary_cross_entropy_with_logits(dom_logit, dom)
            loss = cls_loss + dom_loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            STATUS.update(state="training", step=step, cls_loss=cls_loss.item(), dom_loss=dom_loss.item())
        acc = target_accuracy(model, t_eval)
        STATUS["target_acc"] = acc
        log.info("epoch %d cls %.3f dom %.3f lambda %.2f target_acc %.3f", epoch,
                 cls_loss.item(), dom_loss.item(), lam, acc)
        if rank == 0:
            torch.save({"epoch": epoch, "model": model.module.state_dict(), "target_acc": acc},
                       os.path.join(cfg.out, "dann.pt"))

    STATUS["state"] = "done"
    server.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
