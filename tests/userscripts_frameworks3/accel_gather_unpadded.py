"""Part-of-speech tagger (tiny BertForTokenClassification) with a 🤗 Accelerate loop (CPU, gloo).

main_process_first builds and caches the vocabulary, a collator pads each
batch to its longest sentence (rounded up to a multiple of 16), training uses accelerator.backward and
clip_grad_norm_, and evaluation collects token predictions with
gather_for_metrics to compute token accuracy and per-tag F1 on the main
process, as in the accelerate NER example.

    torchrun --nproc-per-node 2 accel_gather_unpadded.py
"""
import json
import os
import random
import time
from datetime import timedelta

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import set_seed
from sklearn.metrics import f1_score
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForTokenClassification

from fw3_common import WordVocab, arm_hang_watchdog, fresh_outdir, say

NAME = "accel_gather_unpadded"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
TAGS = ["DET", "ADJ", "NOUN", "VERB", "ADV", "CONJ"]
LEXICON = {
    "DET": ["the", "a", "this", "that", "every"],
    "ADJ": ["big", "small", "red", "old", "quiet", "happy", "tired", "green"],
    "NOUN": ["dog", "cat", "car", "teacher", "river", "house", "bird", "child"],
    "VERB": ["sees", "likes", "follows", "finds", "watches", "chases"],
    "ADV": ["quickly", "slowly", "often", "today"],
    "CONJ": ["and", "while"],
}


def noun_phrase(rng):
    words = [("DET", rng.choice(LEXICON["DET"]))]
    for _ in range(rng.choice([0, 0, 1])):
        words.append(("ADJ", rng.choice(LEXICON["ADJ"])))
    words.append(("NOUN", rng.choice(LEXICON["NOUN"])))
    return words


def clause(rng):
    out = noun_phrase(rng) + [("VERB", rng.choice(LEXICON["VERB"]))] + noun_phrase(rng)
    if rng.random() < 0.3:
        out.append(("ADV", rng.choice(LEXICON["ADV"])))
    return out


def sentence(rng, n_clauses=1):
    out = clause(rng)
    for _ in range(n_clauses - 1):
        out += [("CONJ", rng.choice(LEXICON["CONJ"]))] + clause(rng)
    return {"tokens": [w for _, w in out], "tags": [TAGS.index(t) for t, _ in out]}


def load_corpus():
    rng = random.Random(5)
    train = [sentence(rng) for _ in range(256)]
    dev = [sentence(rng) for _ in range(64)]
    # one long, run-on sentence from the second annotation round sits in the dev file
    dev[3] = sentence(rng, n_clauses=4)
    return train, dev


class TagCollator:
    def __init__(self, vocab):
        self.vocab = vocab

    def __call__(self, batch):
        n = max(len(s["tokens"]) for s in batch) + 2  # [CLS] ... [SEP]
        n = -(-n // 16) * 16  # pad_to_multiple_of=16
        ids = torch.full((len(batch), n), self.vocab.pad_id)
        mask = torch.zeros((len(batch), n), dtype=torch.long)
        labels = torch.full((len(batch), n), -100)
        for i, s in enumerate(batch):
            toks = [self.vocab.cls_id] + [self.vocab.stoi.get(t, self.vocab.unk_id) for t in s["tokens"]]
            toks.append(self.vocab.sep_id)
            ids[i, : len(toks)] = torch.tensor(toks)
            mask[i, : len(toks)] = 1
            labels[i, 1: 1 + len(s["tags"])] = torch.tensor(s["tags"])
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def evaluate(accelerator, model, dev_dl):
    model.eval()
    all_preds, all_labels = [], []
    for batch in dev_dl:
        with torch.no_grad():
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        preds = logits.argmax(-1)
        preds, labels = accelerator.gather_for_metrics((preds, batch["labels"]))
        keep = labels != -100
        all_preds.append(preds[keep])
        all_labels.append(labels[keep])
    preds, labels = torch.cat(all_preds), torch.cat(all_labels)
    acc = (preds == labels).float().mean().item()
    f1 = f1_score(labels.numpy(), preds.numpy(), average="macro")
    return {"token_acc": acc, "macro_f1": f1}


def main():
    t0 = time.time()
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))])
    set_seed(1)
    train, dev = load_corpus()
    with accelerator.main_process_first():
        vocab_file = OUT / "vocab.json"
        if not vocab_file.exists():
            WordVocab(sorted({t for s in train for t in s["tokens"]})).save(vocab_file)
        vocab = WordVocab.load(vocab_file)

    collate = TagCollator(vocab)
    train_dl = DataLoader(train, batch_size=16, shuffle=True, collate_fn=collate)
    dev_dl = DataLoader(dev, batch_size=8, shuffle=False, collate_fn=collate)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=len(TAGS))
    model = BertForTokenClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model, optimizer, train_dl, dev_dl = accelerator.prepare(model, optimizer, train_dl, dev_dl)

    for epoch in range(2):
        model.train()
        for step, batch in enumerate(train_dl):
            loss = model(**batch).loss
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
        metrics = evaluate(accelerator, model, dev_dl)
        accelerator.print(f"epoch {epoch}: loss={loss.item():.4f} {json.dumps(metrics)}")

    accelerator.wait_for_everyone()
    accelerator.save_model(model, OUT / "final")
    accelerator.end_training()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
