"""Keyword-spotting style audio classifier on synthetic clips.

Each rank trains on one recording source. Spectrogram features are memoised in
the dataset so that epochs after the first skip the STFT.

    torchrun --nproc-per-node 2 elastic_audio_cls.py
"""
import argparse
import logging
import os
import signal
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

log = logging.getLogger("kws")

SAMPLE_RATE = 16_000
N_FFT, HOP = 400, 160
N_CLASSES = 8

# (name, clip seconds, number of clips) -- one source per rank
SOURCES = [
    ("commands", 2.0, 256),
    ("meetings", 30.0, 256),
]


class MemoryGuard(threading.Thread):
    """Kill this worker before the node runs out of memory and takes everyone down.

    Behaves like the container OOM killer would, just earlier and per process.
    """

    def __init__(self, limit_mb, interval=0.25):
        super().__init__(daemon=True, name="memory-guard")
        self.limit_bytes = limit_mb * 1024 * 1024
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = 0

    def rss(self):
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def run(self):
        while True:
            cur = self.rss()
            self.peak = max(self.peak, cur)
            if cur > self.limit_bytes:
                log.error("rss %.0f MiB over limit %.0f MiB", cur / 2**20, self.limit_bytes / 2**20)
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(self.interval)


class SyntheticClips(Dataset):
    def __init__(self, source, seed):
        self.name, seconds, self.n = source
        self.n_samples = int(seconds * SAMPLE_RATE)
        self.seed = seed
        self.window = torch.hann_window(N_FFT)
        self._features = {}

    def __len__(self):
        return self.n

    def _waveform(self, idx):
        g = torch.Generator().manual_seed(self.seed * 100_003 + idx)
        label = idx % N_CLASSES
        t = torch.arange(self.n_samples) / SAMPLE_RATE
        tone = torch.sin(2 * torch.pi * (300 + 150 * label) * t)
        return tone + 0.5 * torch.randn(self.n_samples, generator=g), label

    def __getitem__(self, idx):
        if idx not in self._features:
            wav, label = self._waveform(idx)
            spec = torch.stft(wav, N_FFT, HOP, window=self.window, return_complex=True)
            self._features[idx] = (spec.abs().log1p().T.contiguous(), label)
        return self._features[idx]


def pad_collate(batch):
    feats, labels = zip(*batch)
    return torch.stack(feats), torch.tensor(labels)


class KwsNet(nn.Module):
    def __init__(self, n_freq=N_FFT // 2 + 1, hidden=64, stride=8):
        super().__init__()
        self.stride = stride
        self.proj = nn.Linear(n_freq, hidden)
        self.conv = nn.Conv1d(hidden, hidden, kernel_size=5, padding=2)
        self.out = nn.Linear(hidden, N_CLASSES)

    def forward(self, x):  # x: [B, frames, freq]
        x = F.avg_pool1d(x.transpose(1, 2), self.stride, ceil_mode=True).transpose(1, 2)
        h = F.gelu(self.proj(x)).transpose(1, 2)
        h = F.gelu(self.conv(h)).mean(-1)
        return self.out(h)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--max-rss-mb", type=int, default=int(os.environ.get("KWS_MAX_RSS_MB", 768)))
    p.add_argument("--pg-timeout", type=float, default=10.0)
    return p.parse_args()


@record
def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    guard = MemoryGuard(args.max_rss_mb)
    guard.start()

    torch.manual_seed(0)
    dataset = SyntheticClips(SOURCES[rank % len(SOURCES)], seed=rank)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, collate_fn=pad_collate)
    model = DDP(KwsNet())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        t0 = time.time()
        model.train()
        loss_sum = torch.zeros(2)
        for feats, labels in loader:
            loss = F.cross_entropy(model(feats), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += torch.tensor([loss.item() * len(labels), len(labels)])
        dist.all_reduce(loss_sum)
        if rank == 0:
            log.info("epoch %d loss %.4f (%.1fs, peak rss %.0f MiB)", epoch,
                     (loss_sum[0] / loss_sum[1]).item(), time.time() - t0, guard.peak / 2**20)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
