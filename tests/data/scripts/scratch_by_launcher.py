"""A DDP job whose ranks share a scratch folder named after their launcher's pid (``os.getppid()``): rank 0
writes the vocabulary there, the others read it after a barrier.  Under plain torchrun every rank's parent is
torchrun's agent, so they agree on the folder; a supervisor that puts a process of its own between the agent
and each rank splits it into one folder per rank, and rank 1 fails with FileNotFoundError (a failure the
user never met).  Keyed on the parent pid as a job-wide id, as scripts in the wild do for /dev/shm caches.
"""
import json
import os
import tempfile

import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    scratch = os.path.join(tempfile.gettempdir(), f"vocab-cache-{os.getppid()}")
    os.makedirs(scratch, exist_ok=True)
    path = os.path.join(scratch, "vocab.json")
    if rank == 0:
        with open(path + ".tmp", "w") as f:
            json.dump({"<pad>": 0, "<unk>": 1, "the": 2}, f)
        os.replace(path + ".tmp", path)
    dist.barrier()
    with open(path) as f:
        vocab = json.load(f)
    print(f"rank {rank}: vocabulary of {len(vocab)} from {scratch}", flush=True)
    dist.barrier()
    if rank == 0:
        os.unlink(path)
        os.rmdir(scratch)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
