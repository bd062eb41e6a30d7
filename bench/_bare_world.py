"""A bare world (the unit of bench_make_run): import torch, init_process_group (gloo), barrier, destroy."""
import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
