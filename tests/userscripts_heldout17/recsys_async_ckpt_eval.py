"""Matrix-factorisation recommender: one learner process, one evaluator process.

The learner trains BPR on (synthetic) implicit feedback and snapshots the
model every `eval_every` steps.  Writing a few hundred MB of embeddings is
slow, so snapshots are written by a background thread and training carries
on.  The evaluator process is told about each new snapshot over the process
group, loads it and computes recall@k on held-out interactions, so the
learner never pays for evaluation.

    torchrun --nproc-per-node 2 recsys_async_ckpt_eval.py
"""
import json
import logging
import os
import queue
import shutil
import threading
import time
from dataclasses import dataclass, asdict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

log = logging.getLogger("mf")


@dataclass
class MFConfig:
    out_dir: str = "/tmp/ho17_recsys_async"
    n_users: int = 120_000
    n_items: int = 60_000
    dim: int = 96
    n_interactions: int = 200_000
    batch_size: int = 2048
    total_steps: int = 60
    eval_every: int = 20
    lr: float = 0.05
    topk: int = 20
    seed: int = 5


def synth_interactions(cfg):
    """Users belong to taste clusters; items are popular inside a cluster."""
    g = torch.Generator().manual_seed(cfg.seed)
    n_clusters = 32
    user_c = torch.randint(n_clusters, (cfg.n_users,), generator=g)
    item_c = torch.randint(n_clusters, (cfg.n_items,), generator=g)
    users = torch.randint(cfg.n_users, (cfg.n_interactions,), generator=g)
    items_by_c = [torch.nonzero(item_c == c).squeeze(1) for c in range(n_clusters)]
    pick = torch.rand(cfg.n_interactions, generator=g)
    items = torch.empty_like(users)
    for c in range(n_clusters):
        sel = user_c[users] == c
        pool = items_by_c[c]
        items[sel] = pool[torch.randint(len(pool), (int(sel.sum()),), generator=g)]
    noise = pick < 0.2
    items[noise] = torch.randint(cfg.n_items, (int(noise.sum()),), generator=g)
    return users, items


class MF(nn.Module):
    def __init__(self, n_users, n_items, dim):
        super().__init__()
        self.user = nn.Embedding(n_users, dim, sparse=True)
        self.item = nn.Embedding(n_items, dim, sparse=True)
        nn.init.normal_(self.user.weight, std=0.05)
        nn.init.normal_(self.item.weight, std=0.05)

    def score(self, u, i):
        return (self.user(u) * self.item(i)).sum(-1)


class AsyncCheckpointWriter:
    """Writes snapshots on a background thread so the training loop never blocks."""

    def __init__(self):
        self._q = queue.Queue()
        self._t = threading.Thread(target=self._loop, name="ckpt-writer", daemon=True)
        self._t.start()

    def _loop(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            state, path = item
            torch.save(state, path)
            log.info("snapshot written: %s", os.path.basename(path))

    def submit(self, model, opt, step, path):
        state = {
            "step": step,
            "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "optimizer": opt.state_dict(),
        }
        self._q.put((state, path))

    def close(self):
        self._q.put(None)
        self._t.join()


def run_learner(cfg, evaluator_rank, users, items):
    model = MF(cfg.n_users, cfg.n_items, cfg.dim)
    opt = torch.optim.SparseAdam(model.parameters(), lr=cfg.lr)
    writer = AsyncCheckpointWriter()
    g = torch.Generator().manual_seed(cfg.seed + 100)
    t0 = time.time()
    for step in range(1, cfg.total_steps + 1):
        idx = torch.randint(len(users), (cfg.batch_size,), generator=g)
        u, pos = users[idx], items[idx]
        neg = torch.randint(cfg.n_items, (cfg.batch_size,), generator=g)
        loss = -torch.nn.functional.logsigmoid(model.score(u, pos) - model.score(u, neg)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            log.info("step %d bpr_loss %.4f (%.1f steps/s)", step, loss.item(), step / (time.time() - t0))
        if step % cfg.eval_every == 0:
            path = os.path.join(cfg.out_dir, f"snapshot_{step:06d}.pt")
            writer.submit(model, opt, step, path)
            dist.broadcast_object_list([{"step": step, "path": path}], src=dist.get_rank())
    dist.broadcast_object_list([{"step": None, "path": None}], src=dist.get_rank())
    writer.close()
    return {"final_loss": loss.item()}


@torch.no_grad()
def recall_at_k(model_state, users, items, k, n_eval_users=512):
    U, V = model_state["user.weight"], model_state["item.weight"]
    eval_users = users[:n_eval_users]
    truth = items[:n_eval_users]
    topk = (U[eval_users] @ V.T).topk(k, dim=1).indices
    return (topk == truth[:, None]).any(1).float().mean().item()


def run_evaluator(cfg, learner_rank, users, items):
    history = []
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=learner_rank)
        msg = box[0]
        if msg["step"] is None:
            break
        # shared FS may lag a little: wait until the file shows up with data in it
        while not (os.path.exists(msg["path"]) and os.path.getsize(msg["path"]) > 0):
            time.sleep(0.05)
        snap = torch.load(msg["path"], map_location="cpu", weights_only=True)
        r = recall_at_k(snap["model"], users, items, cfg.topk)
        history.append({"step": msg["step"], f"recall@{cfg.topk}": r})
        log.info("eval step %d recall@%d %.4f", msg["step"], cfg.topk, r)
    return {"history": history}


def main():
    cfg = MFConfig()
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    evaluator_rank = int(os.environ.get("EVAL_RANK", world - 1))
    learner_rank = 0 if evaluator_rank != 0 else 1
    role = "evaluator" if rank == evaluator_rank else "learner"
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {role}[{rank}] %(message)s")

    if role == "learner":
        shutil.rmtree(cfg.out_dir, ignore_errors=True)
        os.makedirs(cfg.out_dir)
        with open(os.path.join(cfg.out_dir, "config.json"), "w") as f:
            json.dump(asdict(cfg), f, indent=1)
    dist.barrier()

    users, items = synth_interactions(cfg)
    n_test = 4096  # the last interactions are held out for recall
    if role == "learner":
        result = run_learner(cfg, evaluator_rank, users[:-n_test], items[:-n_test])
    else:
        result = run_evaluator(cfg, learner_rank, users[-n_test:], items[-n_test:])

    results = [None] * world
    dist.all_gather_object(results, {"role": role, **result})
    if role == "learner":
        with open(os.path.join(cfg.out_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        log.info("results: %s", results)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
