"""Part-of-speech tagging with a tiny BERT, a word-level fast tokenizer built on the fly, and Accelerate.

Batches are padded dynamically by DataCollatorForTokenClassification.

Launch:
    python -m torch.distributed.run --nproc-per-node 2 accelerate_pos_tagger.py --epochs 2
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import random
from datetime import timedelta

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from sklearn.metrics import classification_report
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from torch.utils.data import DataLoader
from transformers import (
    BertConfig,
    BertForTokenClassification,
    DataCollatorForTokenClassification,
    PreTrainedTokenizerFast,
)

LEXICON = {
    "DET": ["the", "a", "this", "every"],
    "ADJ": ["small", "red", "quick", "old", "bright"],
    "NOUN": ["dog", "car", "river", "teacher", "city", "song"],
    "VERB": ["sees", "likes", "crosses", "builds", "hears"],
    "ADV": ["quietly", "often", "today", "slowly"],
}
TAGS = sorted(LEXICON)


def sentence(rng):
    words, tags = [], []

    def np_():
        words.append(rng.choice(LEXICON["DET"]))
        tags.append("DET")
        for _ in range(rng.randint(0, 3)):
            words.append(rng.choice(LEXICON["ADJ"]))
            tags.append("ADJ")
        words.append(rng.choice(LEXICON["NOUN"]))
        tags.append("NOUN")

    np_()
    words.append(rng.choice(LEXICON["VERB"]))
    tags.append("VERB")
    np_()
    if rng.random() < 0.5:
        words.append(rng.choice(LEXICON["ADV"]))
        tags.append("ADV")
    return words, tags


def build_tokenizer():
    words = [w for ws in LEXICON.values() for w in ws]
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(sorted(words))}}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]")


def encode(tokenizer, sents):
    tag_id = {t: i for i, t in enumerate(TAGS)}
    features = []
    for words, tags in sents:
        enc = tokenizer(words, is_split_into_words=True)
        features.append({"input_ids": enc["input_ids"], "labels": [tag_id[t] for t in tags]})
    return features


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--n-train", type=int, default=256)
    ap.add_argument("--n-eval", type=int, default=64)
    ap.add_argument("--timeout", type=int, default=30)
    args = ap.parse_args()

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=args.timeout))])
    set_seed(0)
    rng = random.Random(0)
    tokenizer = build_tokenizer()
    train_feats = encode(tokenizer, [sentence(rng) for _ in range(args.n_train)])
    eval_feats = encode(tokenizer, [sentence(rng) for _ in range(args.n_eval)])
    collator = DataCollatorForTokenClassification(tokenizer)
    train_dl = DataLoader(train_feats, batch_size=args.batch_size, shuffle=True, collate_fn=collator)
    eval_dl = DataLoader(eval_feats, batch_size=args.batch_size, collate_fn=collator)

    model = BertForTokenClassification(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=32,
            num_labels=len(TAGS),
        )
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer, train_dl, eval_dl = accelerator.prepare(model, optimizer, train_dl, eval_dl)

    for epoch in range(args.epochs):
        model.train()
        for batch in train_dl:
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()

        model.eval()
        y_true, y_pred = [], []
        for batch in eval_dl:
            with torch.no_grad():
                logits = model(**batch).logits
            preds = logits.argmax(dim=-1)
            preds, labels = accelerator.gather_for_metrics((preds, batch["labels"]))
            keep = labels != -100
            y_true += labels[keep].tolist()
            y_pred += preds[keep].tolist()
        if accelerator.is_main_process:
            report = classification_report(y_true, y_pred, target_names=TAGS, output_dict=True, zero_division=0)
            print(f"epoch {epoch}: loss={loss.item():.3f} token acc={report['accuracy']:.3f}", flush=True)

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
