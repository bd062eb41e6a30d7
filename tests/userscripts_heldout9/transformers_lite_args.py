"""Tiny HfArgumentParser stand-in: dataclass fields -> --kebab-case flags."""
import argparse
import dataclasses
import typing


def parse_into(cls, argv=None):
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        flag = "--" + f.name.replace("_", "-")
        if typing.get_origin(f.type) in (list, typing.List):
            p.add_argument(flag, type=typing.get_args(f.type)[0], nargs="+", default=default)
        else:
            p.add_argument(flag, type=f.type, default=default)
    return cls(**vars(p.parse_args(argv)))
