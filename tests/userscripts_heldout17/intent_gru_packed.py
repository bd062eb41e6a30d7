"""Intent classification for a voice assistant: BiGRU over packed sequences.

Utterances are generated from templates and mixed with a handful of real
transcripts we collected by hand.  Text is normalised (lower-case,
punctuation and disfluencies removed) before tokenisation.  Epoch metrics are
reduced across ranks with an async all_reduce that overlaps the checkpoint
write.
"""
import json
import logging
import os
import random
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass, asdict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset, DistributedSampler


@dataclass
class Config:
    out_dir: str = "/tmp/ho17_intent_gru"
    n_synthetic: int = 2400
    emb: int = 48
    hidden: int = 64
    batch_size: int = 32
    epochs: int = 4
    lr: float = 3e-3
    seed: int = 21


INTENTS = {
    "weather": ["what's the weather in {city}", "will it rain in {city} {day}", "forecast for {city} {day}"],
    "alarm": ["set an alarm for {time}", "wake me up at {time} {day}", "alarm at {time} please"],
    "music": ["play some {genre}", "put on {genre} music", "i want to hear {genre}"],
    "flight": ["book a flight to {city} {day}", "find flights to {city}", "i need a ticket to {city} {day}"],
    "cancel": ["cancel that", "never mind", "stop", "forget it please"],
}
SLOTS = {
    "city": ["paris", "tokyo", "lima", "oslo", "cairo", "denver", "hanoi"],
    "day": ["today", "tomorrow", "on monday", "this weekend", "tonight"],
    "time": ["7 am", "six thirty", "noon", "5 pm", "midnight"],
    "genre": ["jazz", "rock", "lofi", "classical", "techno", "salsa"],
}
# transcripts from the pilot study, kept verbatim
PILOT_TRANSCRIPTS = [
    ("uh what's the weather like in oslo", "weather"),
    ("um, play, uh, jazz?", "music"),
    ("could you um set an alarm for noon", "alarm"),
    ("uh... um... please.", "cancel"),
    ("book me uh a flight to lima tomorrow", "flight"),
    ("hmm never mind", "cancel"),
]
DISFLUENCIES = {"uh", "um", "hmm", "er", "please", "like"}


def normalise(text):
    words = re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()
    return [w for w in words if w not in DISFLUENCIES]


def make_corpus(cfg):
    rng = random.Random(cfg.seed)
    rows = []
    names = sorted(INTENTS)
    for _ in range(cfg.n_synthetic):
        intent = rng.choice(names)
        tpl = rng.choice(INTENTS[intent])
        text = tpl.format(**{k: rng.choice(v) for k, v in SLOTS.items()})
        if rng.random() < 0.2:
            text = rng.choice(["uh ", "um ", "please "]) + text
        rows.append((text, intent))
    rows += PILOT_TRANSCRIPTS
    rng.shuffle(rows)
    return rows, names


class IntentDataset(Dataset):
    def __init__(self, rows, vocab, labels):
        self.items = [([vocab.get(w, 1) for w in normalise(t)], labels.index(y)) for t, y in rows]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        ids, y = self.items[i]
        return torch.tensor(ids, dtype=torch.long), y


def collate(batch):
    batch.sort(key=lambda b: len(b[0]), reverse=True)
    seqs, ys = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    return pad_sequence(seqs, batch_first=True), lengths, torch.tensor(ys)


class BiGRUIntent(nn.Module):
    def __init__(self, vocab_size, emb, hidden, n_classes):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb, padding_idx=0)
        self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, n_classes)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=True)
        _, h = self.gru(packed)
        return self.out(torch.cat([h[0], h[1]], dim=1))


def main():
    cfg = Config()
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s rank={rank} %(message)s")
    log = logging.getLogger("intent")

    if rank == 0:
        shutil.rmtree(cfg.out_dir, ignore_errors=True)
        os.makedirs(cfg.out_dir)
    dist.barrier()

    rows, labels = make_corpus(cfg)
    n_val = len(rows) // 10
    train_rows, val_rows = rows[n_val:], rows[:n_val]
    counts = Counter(w for t, _ in train_rows for w in normalise(t))
    vocab = {w: i + 2 for i, (w, _) in enumerate(counts.most_common())}  # 0 pad, 1 unk
    if rank == 0:
        with open(os.path.join(cfg.out_dir, "vocab.json"), "w") as f:
            json.dump({"vocab": vocab, "labels": labels, "config": asdict(cfg)}, f)

    train_ds, val_ds = IntentDataset(train_rows, vocab, labels), IntentDataset(val_rows, vocab, labels)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=cfg.seed)
    train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=train_sampler, collate_fn=collate)
    val_dl = DataLoader(val_ds, batch_size=128, collate_fn=collate,
                        sampler=DistributedSampler(val_ds, shuffle=False))

    torch.manual_seed(cfg.seed)
    model = DDP(BiGRUIntent(len(vocab) + 2, cfg.emb, cfg.hidden, len(labels)))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)

    for epoch in range(cfg.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        t0 = time.time()
        stats = torch.zeros(3)  # loss sum, correct, count
        for step, (x, lengths, y) in enumerate(train_dl):
            logits = model(x, lengths)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            stats += torch.tensor([loss.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)])
            if step % 20 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())

        model.eval()
        vstats = torch.zeros(2)
        with torch.no_grad():
            for x, lengths, y in val_dl:
                vstats += torch.tensor([(model(x, lengths).argmax(1) == y).sum().item(), len(y)])
        both = torch.cat([stats, vstats])
        work = dist.all_reduce(both, async_op=True)
        if rank == 0:  # overlap the checkpoint write with the metric reduction
            torch.save({"epoch": epoch, "model": model.module.state_dict(), "opt": opt.state_dict()},
                       os.path.join(cfg.out_dir, "last.pt"))
        work.wait()
        log.info("epoch %d train_loss %.4f train_acc %.3f val_acc %.3f (%.1fs)", epoch,
                 both[0] / both[2], both[1] / both[2], both[3] / both[4], time.time() - t0)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
