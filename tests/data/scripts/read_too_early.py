"""Rank 0 starts writing the tokenizer cache (the file exists, nothing is in it yet); rank 1, told to go on by a
barrier that comes too early, loads it: torch.load raises a bare EOFError (lab-findings: a reader polling for the
file to exist loads 0 bytes).  The failure is the torn read, on rank 1."""
import os
import sys
import tempfile

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    path = os.path.join(sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir(), "vocab_cache.pt")
    if rank == 0:
        f = open(path, "wb")  # the write has begun; the bytes come later
    dist.barrier()
    if rank == 1:
        vocab = torch.load(path)
        print(f"rank 1: {len(vocab)} tokens", flush=True)
    dist.barrier()
    if rank == 0:
        torch.save({"<pad>": 0}, f)
        f.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
