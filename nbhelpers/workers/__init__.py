"""Rank programs, each runnable by hand: ``torchrun --nproc-per-node 2 -m nbhelpers.workers.<name>``."""
