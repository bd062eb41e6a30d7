"""Small shared helpers for the Lightning / Fabric training scripts in this folder.

Offline only: synthetic data generators, a word vocabulary, the per-run output
directory under /tmp/fw4_<name>/, a rank-prefixed print and a hang watchdog.
"""
import faulthandler
import os
import random
import shutil
import sys
from pathlib import Path


def env_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def fresh_outdir(name: str, wipe: bool = True) -> Path:
    """/tmp/fw4_<name>; global rank 0 wipes it before the process group exists."""
    out = Path(f"/tmp/fw4_{name}")
    if wipe and env_rank() == 0:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def say(*args) -> None:
    print(f"[rank{env_rank()}]", *args, flush=True)


def arm_hang_watchdog(seconds: int) -> None:
    """Our cluster jobs have no wall-clock limit; dump stacks and exit if a rank is stuck."""
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.stderr)


class WordVocab:
    SPECIALS = ["<pad>", "<unk>"]

    def __init__(self, texts=(), min_freq=1):
        counts = {}
        for t in texts:
            for w in self.tokenize(t):
                counts[w] = counts.get(w, 0) + 1
        self.itos = list(self.SPECIALS) + sorted(w for w, c in counts.items() if c >= min_freq)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @staticmethod
    def tokenize(text):
        return text.lower().replace(",", " ").replace(".", " ").replace("?", " ").split()

    def encode(self, text, max_len=None):
        ids = [self.stoi.get(w, 1) for w in self.tokenize(text)] or [1]
        return ids[:max_len] if max_len else ids

    def __len__(self):
        return len(self.itos)


# --------------------------------------------------------------------------
# synthetic customer-support tickets (used by the ticket / intent scripts)
# --------------------------------------------------------------------------
INTENT_PHRASES = {
    "billing": ["charged twice", "invoice is wrong", "refund my payment", "billing address", "unexpected fee"],
    "login": ["cannot log in", "password reset", "two factor code", "account locked", "sign in fails"],
    "shipping": ["package not arrived", "tracking number", "delivery delayed", "wrong address on parcel",
                 "courier lost"],
    "bug": ["app crashes", "button does nothing", "error message appears", "page is blank", "sync broken"],
    "feature": ["please add", "would love dark mode", "export to csv", "integration with slack",
                "keyboard shortcuts"],
    "cancel": ["cancel my subscription", "close my account", "stop renewal", "end the contract",
               "terminate plan"],
}
FILLER = ("hello team i have a question about my account today thanks regards please help "
          "urgent asap again still since yesterday this morning order customer").split()


def make_ticket(intent, rng: random.Random):
    words = rng.sample(FILLER, rng.randint(3, 8))
    phrase = rng.choice(INTENT_PHRASES[intent])
    pos = rng.randint(0, len(words))
    return " ".join(words[:pos] + phrase.split() + words[pos:])
