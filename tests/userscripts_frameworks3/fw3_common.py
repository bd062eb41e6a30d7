"""Small shared helpers for the fw3 training scripts.

Everything here is local and offline: a hand-written word-level vocabulary,
synthetic text generators and the per-run output directory.
"""
import json
import os
import random
import shutil
from pathlib import Path


def env_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def fresh_outdir(name: str) -> Path:
    """/tmp/fw3_<name>, wiped by global rank 0 before any process group exists.

    Other ranks only write after the process group is up, which needs rank 0
    to have got past this point, so the wipe cannot delete their files.
    """
    out = Path(f"/tmp/fw3_{name}")
    if env_rank() == 0:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def say(*args) -> None:
    print(f"[rank{env_rank()}]", *args, flush=True)


# --------------------------------------------------------------------------
# word-level vocabulary
# --------------------------------------------------------------------------
class WordVocab:
    SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[BOS]", "[EOS]"]

    def __init__(self, words):
        self.itos = list(self.SPECIALS)
        for w in words:
            if w not in self.itos:
                self.itos.append(w)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    pad_id = property(lambda self: self.stoi["[PAD]"])
    unk_id = property(lambda self: self.stoi["[UNK]"])
    cls_id = property(lambda self: self.stoi["[CLS]"])
    sep_id = property(lambda self: self.stoi["[SEP]"])
    bos_id = property(lambda self: self.stoi["[BOS]"])
    eos_id = property(lambda self: self.stoi["[EOS]"])

    def __len__(self):
        return len(self.itos)

    def tokens(self, text):
        return text.lower().replace("?", " ?").replace(",", " ,").split()

    def encode(self, text, max_length=None, cls=False):
        ids = [self.stoi.get(t, self.unk_id) for t in self.tokens(text)]
        if cls:
            ids = [self.cls_id] + ids + [self.sep_id]
        if max_length is not None:
            ids = ids[:max_length]
        return ids

    def decode(self, ids):
        return " ".join(self.itos[i] for i in ids if i != self.pad_id)

    def save(self, path):
        Path(path).write_text(json.dumps({"itos": self.itos}))

    @classmethod
    def load(cls, path):
        v = cls([])
        v.itos = json.loads(Path(path).read_text())["itos"]
        v.stoi = {w: i for i, w in enumerate(v.itos)}
        return v


# --------------------------------------------------------------------------
# sentiment reviews
# --------------------------------------------------------------------------
POS_ADJ = ["great", "wonderful", "moving", "brilliant", "charming", "funny", "clever", "beautiful"]
NEG_ADJ = ["boring", "awful", "dull", "clumsy", "tedious", "messy", "bland", "painful"]
SUBJECTS = ["movie", "plot", "acting", "soundtrack", "ending", "script", "cast", "story", "film", "dialogue"]
FILLERS = ["the", "was", "really", "quite", "and", "very", "i", "found", "it", "overall", "a", "bit",
           "this", "honestly", "but", "not", "too"]
REVIEW_WORDS = POS_ADJ + NEG_ADJ + SUBJECTS + FILLERS


def make_review(rng: random.Random):
    label = rng.choice(["positive", "negative"])
    main = POS_ADJ if label == "positive" else NEG_ADJ
    other = NEG_ADJ if label == "positive" else POS_ADJ
    parts = [f"the {rng.choice(SUBJECTS)} was {rng.choice(['really', 'quite', 'very'])} {rng.choice(main)}"]
    if rng.random() < 0.5:
        parts.append(f"and the {rng.choice(SUBJECTS)} was {rng.choice(main)}")
    if rng.random() < 0.3:
        parts.append(f"but the {rng.choice(SUBJECTS)} was a bit {rng.choice(other)}")
    if rng.random() < 0.4:
        parts.append(f"overall i found it {rng.choice(main)}")
    return {"text": " ".join(parts), "label": label}


def make_reviews(n: int, seed: int):
    rng = random.Random(seed)
    return [make_review(rng) for _ in range(n)]


# --------------------------------------------------------------------------
# hang watchdog
# --------------------------------------------------------------------------
def arm_hang_watchdog(seconds: int = 60) -> None:
    """Dump every thread's Python stack and exit(1) if this process is still
    running after `seconds`.  gloo has no watchdog of its own, so a rank stuck
    in a mismatched collective can otherwise wait forever."""
    import faulthandler

    faulthandler.dump_traceback_later(seconds, exit=True)
