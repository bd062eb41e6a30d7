"""Tiny stand-in for transformers.HfArgumentParser (no transformers on the cluster image)."""
import argparse
import dataclasses
import typing


class HfArgumentParser(argparse.ArgumentParser):
    def __init__(self, *dataclass_types):
        super().__init__()
        self.dataclass_types = dataclass_types
        for dtype in dataclass_types:
            for f in dataclasses.fields(dtype):
                default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
                name = "--" + f.name
                if typing.get_origin(f.type) in (list, typing.List):
                    self.add_argument(name, nargs="+", default=default)
                elif f.type is bool:
                    self.add_argument(name, type=lambda s: s.lower() in ("1", "true", "yes"), default=default)
                else:
                    self.add_argument(name, type=f.type, default=default)

    def parse_args_into_dataclasses(self, args=None):
        ns = self.parse_args(args)
        out = []
        for dtype in self.dataclass_types:
            keys = {f.name for f in dataclasses.fields(dtype)}
            out.append(dtype(**{k: v for k, v in vars(ns).items() if k in keys}))
        return tuple(out)
