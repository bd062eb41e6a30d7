"""Shared helpers for the hf_* / acc_* training scripts of this folder.

Offline only: synthetic corpora, a word-level tokenizer built from scratch with
the `tokenizers` library, the per-run output directory and a small print helper.
"""
import faulthandler
import os
import random
import shutil
from pathlib import Path

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]


def env_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def say(*args) -> None:
    print(f"[rank{env_rank()}]", *args, flush=True)


def run_dir(script: str) -> Path:
    """/tmp/fw4_<script>; global rank 0 clears it before the process group exists."""
    out = Path(f"/tmp/fw4_{script}")
    if env_rank() == 0:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def arm_watchdog(seconds: int) -> None:
    """Our cluster jobs carry their own wall-clock guard: dump every thread's
    stack and exit(1) if the process is still alive after `seconds`."""
    faulthandler.dump_traceback_later(seconds, exit=True)


# ---------------------------------------------------------------------------
# tokenizer
# ---------------------------------------------------------------------------
def build_word_tokenizer(texts, min_freq: int = 1, model_max_length: int = 64):
    """WordLevel tokenizer trained on `texts`, wrapped as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIAL_TOKENS, min_frequency=min_freq)
    tok.train_from_iterator((t.lower() for t in texts), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", model_max_length=model_max_length,
    )


# ---------------------------------------------------------------------------
# support tickets (4 queues)
# ---------------------------------------------------------------------------
TICKET_QUEUES = ["billing", "shipping", "account", "technical"]
_TICKET_KEYWORDS = {
    "billing": ["invoice", "refund", "charged", "payment", "card", "subscription", "receipt", "price"],
    "shipping": ["parcel", "delivery", "courier", "tracking", "arrived", "package", "address", "late"],
    "account": ["password", "login", "email", "username", "locked", "profile", "verification", "reset"],
    "technical": ["crash", "error", "app", "update", "screen", "freezes", "bug", "install"],
}
_TICKET_FILLER = ["hi", "hello", "my", "the", "is", "not", "working", "please", "help", "since", "yesterday",
                  "i", "can", "you", "check", "again", "still", "thanks", "order", "urgent", "today", "a", "it"]


def make_ticket(rng: random.Random) -> dict:
    queue = rng.choice(TICKET_QUEUES)
    words = rng.sample(_TICKET_FILLER, rng.randint(3, 8)) + rng.sample(_TICKET_KEYWORDS[queue], rng.randint(1, 3))
    if rng.random() < 0.15:  # a little cross-queue noise
        other = rng.choice([q for q in TICKET_QUEUES if q != queue])
        words.append(rng.choice(_TICKET_KEYWORDS[other]))
    rng.shuffle(words)
    return {"text": " ".join(words), "label": TICKET_QUEUES.index(queue)}


def make_tickets(n: int, seed: int) -> list:
    rng = random.Random(seed)
    return [make_ticket(rng) for _ in range(n)]


# ---------------------------------------------------------------------------
# product reviews (positive / negative) with a long tail of rare words
# ---------------------------------------------------------------------------
_POS = ["great", "love", "excellent", "perfect", "sturdy", "recommend", "comfortable", "fast", "beautiful"]
_NEG = ["broken", "refund", "awful", "cheap", "flimsy", "disappointed", "returned", "slow", "useless"]
_ITEMS = ["blender", "kettle", "headphones", "charger", "backpack", "lamp", "keyboard", "mattress", "jacket"]
_GLUE = ["the", "this", "was", "is", "and", "it", "after", "a", "week", "very", "really", "my", "for"]


def make_review(rng: random.Random, n_brands: int = 400) -> dict:
    label = int(rng.random() < 0.5)
    sent = _POS if label else _NEG
    words = rng.sample(_GLUE, rng.randint(3, 7)) + [rng.choice(_ITEMS)] + rng.sample(sent, rng.randint(1, 3))
    # brand names / typos: each appears only a handful of times in the corpus
    words += [f"brand{rng.randint(0, n_brands)}" for _ in range(rng.randint(0, 2))]
    rng.shuffle(words)
    return {"text": " ".join(words), "label": label}


def make_reviews(n: int, seed: int, n_brands: int = 400) -> list:
    rng = random.Random(seed)
    return [make_review(rng, n_brands) for _ in range(n)]


# ---------------------------------------------------------------------------
# short recipe lines for a tiny causal LM
# ---------------------------------------------------------------------------
_VERBS = ["chop", "slice", "boil", "fry", "bake", "stir", "whisk", "season", "grill", "simmer"]
_FOODS = ["onions", "garlic", "carrots", "potatoes", "chicken", "rice", "beans", "tomatoes", "eggs", "pasta"]
_HOW = ["gently", "for ten minutes", "until golden", "with salt", "in butter", "over low heat", "briefly"]


def make_recipe_lines(n: int, seed: int) -> list:
    rng = random.Random(seed)
    return [
        f"{rng.choice(_VERBS)} the {rng.choice(_FOODS)} {rng.choice(_HOW)} then {rng.choice(_VERBS)} "
        f"the {rng.choice(_FOODS)} {rng.choice(_HOW)}"
        for _ in range(n)
    ]
