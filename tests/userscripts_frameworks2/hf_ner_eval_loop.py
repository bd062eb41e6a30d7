#!/usr/bin/env python
"""Token classification (CoNLL-style PER/LOC/ORG NER) with a small ELECTRA encoder.

The stock Trainer evaluation accumulates logits for every token, which blew up host
memory on the full dev set, so `evaluation_loop` is overridden: only argmax ids are
kept, gathered across ranks, and scored with entity-level (span) precision/recall/F1.

    torchrun --nproc-per-node 2 hf_ner_eval_loop.py --eval-steps 10
"""
import argparse
import logging
import os
import random
import shutil
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    DataCollatorForTokenClassification,
    ElectraConfig,
    ElectraForTokenClassification,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)
from transformers.trainer_utils import EvalLoopOutput

logger = logging.getLogger("ner")

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
L2I = {l: i for i, l in enumerate(LABELS)}
ENTITIES = {
    "PER": [["angela", "merkel"], ["john"], ["maria", "lopez"], ["kenji", "sato"], ["ali"]],
    "LOC": [["berlin"], ["new", "york"], ["lake", "geneva"], ["osaka"], ["rio", "de", "janeiro"]],
    "ORG": [["siemens"], ["united", "nations"], ["acme", "corp"], ["red", "cross"], ["fifa"]],
}
CONTEXT = ["said", "on", "monday", "that", "the", "visit", "to", "was", "met", "with", "in",
           "talks", "officials", "from", "announced", "a", "deal", "reported", "by", "and"]


def make_sentences(n, seed):
    rng = random.Random(seed)
    data = []
    for _ in range(n):
        words, tags = [], []
        # most newswire sentences are short, a few are long run-ons
        n_chunks = rng.randint(2, 5) if rng.random() > 0.04 else rng.randint(9, 14)
        for _ in range(n_chunks):
            for _ in range(rng.randint(1, 3)):
                words.append(rng.choice(CONTEXT))
                tags.append("O")
            if rng.random() < 0.7:
                etype = rng.choice(list(ENTITIES))
                ent = rng.choice(ENTITIES[etype])
                for j, w in enumerate(ent):
                    words.append(w)
                    tags.append(("B-" if j == 0 else "I-") + etype)
        data.append((words, [L2I[t] for t in tags]))
    return data


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for w in CONTEXT + [w for ents in ENTITIES.values() for e in ents for w in e]:
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


class NerDataset(torch.utils.data.Dataset):
    def __init__(self, sentences, tok, max_length=128):
        self.items = []
        for words, tags in sentences:
            ids = [tok.cls_token_id] + tok.convert_tokens_to_ids(words)[: max_length - 2] + [tok.sep_token_id]
            labels = [-100] + tags[: max_length - 2] + [-100]
            self.items.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def spans(seq):
    out, start, etype = set(), None, None
    for i, t in enumerate(list(seq) + ["O"]):
        if start is not None and not (t.startswith("I-") and t[2:] == etype):
            out.add((start, i, etype))
            start = None
        if t.startswith("B-"):
            start, etype = i, t[2:]
    return out


def entity_prf(preds, labels):
    tp = n_pred = n_gold = 0
    for p_row, l_row in zip(preds, labels):
        keep = l_row != -100
        p_tags = [LABELS[i] for i in p_row[keep]]
        g_tags = [LABELS[i] for i in l_row[keep]]
        ps, gs = spans(p_tags), spans(g_tags)
        tp += len(ps & gs)
        n_pred += len(ps)
        n_gold += len(gs)
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def pad_cat(chunks, pad_value=-100):
    width = max(c.shape[1] for c in chunks)
    return torch.cat([torch.nn.functional.pad(c, (0, width - c.shape[1]), value=pad_value) for c in chunks])


class NerTrainer(Trainer):
    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                        metric_key_prefix="eval"):
        model = self.model
        model.eval()
        losses, pred_chunks, label_chunks = [], [], []
        for inputs in dataloader:
            inputs = self._prepare_inputs(inputs)
            with torch.no_grad():
                out = model(**inputs)
            losses.append(out.loss.detach().reshape(1))
            pred_chunks.append(out.logits.argmax(-1))
            label_chunks.append(inputs["labels"])

        preds, labels = pad_cat(pred_chunks), pad_cat(label_chunks)
        loss = torch.cat(losses).mean()
        if self.args.world_size > 1:
            world = self.args.world_size
            gathered_p = [torch.empty_like(preds) for _ in range(world)]
            gathered_l = [torch.empty_like(labels) for _ in range(world)]
            dist.all_gather(gathered_p, preds)
            dist.all_gather(gathered_l, labels)
            preds, labels = torch.cat(gathered_p), torch.cat(gathered_l)
            dist.all_reduce(loss)
            loss = loss / world

        preds, labels = preds.cpu().numpy(), labels.cpu().numpy()
        prf = entity_prf(preds, labels)
        metrics = {f"{metric_key_prefix}_loss": loss.item()}
        metrics.update({f"{metric_key_prefix}_{k}": v for k, v in prf.items()})
        return EvalLoopOutput(predictions=preds, label_ids=labels, metrics=metrics, num_samples=len(preds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output-dir", default="/tmp/fw2_hf_ner/electra-ner")
    ap.add_argument("--train-size", type=int, default=480)
    ap.add_argument("--eval-size", type=int, default=128)
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--eval-steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    logging.basicConfig(level=logging.INFO,
                        format=f"[%(asctime)s] [rank {os.environ.get('RANK', '0')}] %(message)s")
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=30))
    if dist.get_rank() == 0:
        shutil.rmtree(args.output_dir, ignore_errors=True)
    dist.barrier()

    tok = build_tokenizer()
    train_ds = NerDataset(make_sentences(args.train_size, args.seed), tok)
    eval_ds = NerDataset(make_sentences(args.eval_size, args.seed + 1), tok)
    config = ElectraConfig(vocab_size=tok.vocab_size, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=128, max_position_embeddings=128,
                           num_labels=len(LABELS), id2label=dict(enumerate(LABELS)), label2id=L2I)
    model = ElectraForTokenClassification(config)

    targs = TrainingArguments(
        output_dir=args.output_dir,
        use_cpu=True,
        learning_rate=args.lr,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        eval_strategy="steps",
        eval_steps=args.eval_steps,
        save_strategy="steps",
        save_steps=args.eval_steps,
        save_total_limit=2,
        load_best_model_at_end=True,
        metric_for_best_model="f1",
        logging_steps=5,
        seed=args.seed,
        report_to="none",
        disable_tqdm=True,
    )
    trainer = NerTrainer(model=model, args=targs, train_dataset=train_ds, eval_dataset=eval_ds,
                         data_collator=DataCollatorForTokenClassification(tok))
    trainer.train()
    metrics = trainer.evaluate()
    logger.info("dev entity-F1 %.3f (P %.3f R %.3f)", metrics["eval_f1"], metrics["eval_precision"],
                metrics["eval_recall"])
    trainer.save_model(os.path.join(args.output_dir, "best"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
