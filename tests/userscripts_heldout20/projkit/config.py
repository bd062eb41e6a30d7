"""Config handling: nested dataclasses built from a YAML-ish string + CLI overrides."""
from __future__ import annotations

import argparse
import ast
from dataclasses import MISSING, dataclass, field, fields, is_dataclass


@dataclass
class OptimConfig:
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 0
    grad_clip: float = 0.0


@dataclass
class DataConfig:
    n_samples: int = 2048
    batch_size: int = 64
    eval_batch_size: int = 256
    n_features: int = 32
    num_classes: int = 2
    seed: int = 0


@dataclass
class DistConfig:
    backend: str = "gloo"
    timeout_s: int = 30
    ifname: str = ""


@dataclass
class CkptConfig:
    dir: str = "checkpoints"
    every_n_epochs: int = 1
    keep_last: int = 2


@dataclass
class TrainConfig:
    name: str = "run"
    epochs: int = 2
    seed: int = 1234
    optim: OptimConfig = field(default_factory=OptimConfig)
    data: DataConfig = field(default_factory=DataConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    ckpt: CkptConfig = field(default_factory=CkptConfig)
    extra: dict = field(default_factory=dict)


def _coerce(raw: str):
    raw = raw.strip()
    if raw == "":
        return ""
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def parse_yamlish(text: str) -> dict:
    """Tiny indentation-based parser for the subset of YAML we use in configs."""
    root: dict = {}
    stack = [(-1, root)]
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        key, _, value = line.strip().partition(":")
        while stack and indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        if value.strip() == "":
            parent[key] = {}
            stack.append((indent, parent[key]))
        else:
            parent[key] = _coerce(value)
    return root


def _build(cls, data: dict):
    kwargs = {}
    extra = {}
    names = {f.name: f for f in fields(cls)}
    for k, v in data.items():
        if k not in names:
            extra[k] = v
            continue
        f = names[k]
        default = f.default if f.default_factory is MISSING else f.default_factory()  # type: ignore[misc]
        if is_dataclass(default) and isinstance(v, dict):
            kwargs[k] = _build(type(default), v)
        else:
            kwargs[k] = v
    obj = cls(**kwargs)
    if extra and hasattr(obj, "extra"):
        obj.extra.update(extra)
    return obj


def _set_dotted(d: dict, dotted: str, value):
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def load_config(defaults: str, argv=None) -> TrainConfig:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config entry, e.g. --set optim.lr=3e-4")
    args = ap.parse_args(argv)
    data = parse_yamlish(defaults)
    for item in args.set:
        k, _, v = item.partition("=")
        _set_dotted(data, k, _coerce(v))
    return _build(TrainConfig, data)
