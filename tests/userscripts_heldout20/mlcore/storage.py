"""Checkpoints through torch.distributed.checkpoint (each process writes its shard)."""
from __future__ import annotations

import os

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def save(step_dir: str, model, optimizer, group=None):
    msd, osd = get_state_dict(model, optimizer)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=step_dir, process_group=group)


def load_into(step_dir: str, model, optimizer, group=None):
    msd, osd = get_state_dict(model, optimizer)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=step_dir, process_group=group)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def exists(step_dir: str) -> bool:
    return os.path.exists(os.path.join(step_dir, ".metadata"))
