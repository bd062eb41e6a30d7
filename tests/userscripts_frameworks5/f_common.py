"""Small shared helpers: a hand-made vocabulary, a toy intent/sentiment corpus
and tiny Hugging Face model configs (everything built locally, nothing downloaded)."""
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
FILLER = ("the a my your this that please now today really quite very some any "
          "i we you they it is was be can could would want need to for of on in").split()
INTENTS = {
    "weather": "rain sunny forecast cloudy temperature umbrella storm".split(),
    "music": "song play album playlist guitar volume track".split(),
    "alarm": "wake alarm clock morning snooze timer remind".split(),
    "food": "pizza order dinner restaurant hungry lunch recipe".split(),
    "travel": "flight train ticket hotel airport booking trip".split(),
}
LABELS = sorted(INTENTS)
VOCAB = SPECIAL + FILLER + sorted({w for ws in INTENTS.values() for w in ws})
W2I = {w: i for i, w in enumerate(VOCAB)}


def make_corpus(n, seed=0, labels=LABELS):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        lab = rng.choice(labels)
        words = rng.sample(FILLER, rng.randint(3, 8)) + rng.sample(INTENTS[lab], rng.randint(1, 3))
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": lab})
    return rows


def encode(text, max_len=24):
    ids = [W2I["[CLS]"]] + [W2I.get(w, W2I["[UNK]"]) for w in text.split()][: max_len - 2] + [W2I["[SEP]"]]
    return ids


def pad_batch(seqs, pad_id=0):
    import torch
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids, mask


def tiny_bert(num_labels, **kw):
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, num_labels=num_labels, **kw)
    return BertForSequenceClassification(cfg)
