"""The learned second opinion, fitted on this machine and cached: the classifier's :class:`SecondOpinion`.

Training takes a few seconds once per machine; the fitted model is cached (``~/.cache/nbhelpers``, keyed by the
training split and scikit-learn's version), so later uses load it in milliseconds.  What it reads and when it may
answer are in :mod:`nbhelpers.diagnosis.model`.

    from nbhelpers.runtime import learned
    learned.classify(text)          # the rules, then this model where they are silent
"""
from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from pathlib import Path

from nbhelpers.diagnosis import classify as C
from nbhelpers.diagnosis.model import FIT, TRAIN, features

__all__ = ["predict", "failure_probability", "closest", "classify", "classify_file", "second_opinion"]


def _cache_file() -> Path:
    import hashlib

    import sklearn

    key = hashlib.sha256(TRAIN.read_bytes() + f"{sklearn.__version__} {FIT}".encode()).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "nbhelpers" / f"model-{key}.pkl"


@lru_cache(maxsize=1)
def _model():
    """The fitted model: from the cache when this training split and scikit-learn version trained it before
    (a few ms), else trained now (a few seconds) and cached (best effort)."""
    import pickle

    cache = _cache_file()
    try:
        return pickle.loads(cache.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass
    fitted = _fit()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(fitted))
        os.replace(tmp, cache)
    except OSError:
        pass
    return fitted


def _fit():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    rows = [json.loads(x) for x in TRAIN.read_text().splitlines() if x.strip()]
    docs = [features(r["log"]) for r in rows]
    # chosen by 5-fold cross-validation grouped by project on the training split (tests/data/build_corpus.py)
    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=2, sublinear_tf=True, lowercase=True,
                          max_features=60000)
    X = vec.fit_transform(docs)
    clf = LogisticRegression(C=20.0, max_iter=3000, class_weight="balanced")
    clf.fit(X, [r["label"] for r in rows])
    gate = LogisticRegression(C=20.0, max_iter=3000, class_weight="balanced")
    gate.fit(X, [r["label"] != "healthy" for r in rows])
    return vec, clf, rows, X, gate


def predict(text: str, k: int = 2) -> list[tuple[str, float]]:
    """The model's ``k`` likeliest labels for ``text`` with their probabilities ("healthy": no failure)."""
    vec, clf, *_ = _model()
    probs = clf.predict_proba(vec.transform([features(text)]))[0]
    order = probs.argsort()[::-1][:k]
    return [(str(clf.classes_[i]), float(probs[i])) for i in order]


def failure_probability(text: str) -> float:
    """How sure the failure-or-not model is that ``text`` shows a failure (any category)."""
    vec, *_, gate = _model()
    return float(gate.predict_proba(vec.transform([features(text)]))[0][list(gate.classes_).index(True)])


def closest(text: str, k: int = 3) -> list[dict]:
    """The ``k`` known cases whose error lines read most like ``text``: id, source, label, similarity."""
    vec, _, rows, X, _ = _model()
    sims = (X @ vec.transform([features(text)]).T).toarray().ravel()
    return [{"id": rows[i]["id"], "source": rows[i]["source"], "label": rows[i]["label"],
             "similarity": round(float(sims[i]), 2)} for i in sims.argsort()[::-1][:k] if sims[i] > 0]


def _me():
    return sys.modules[__name__]


def classify(text: str, model: bool = True) -> list[C.Finding]:
    """:func:`nbhelpers.diagnosis.classify.classify` with this model answering where no rule fires."""
    return C.classify(text, _me() if model else None)


def classify_file(path: str | os.PathLike, model: bool = True) -> list[C.Finding]:
    return C.classify_file(path, _me() if model else None)


def second_opinion(text: str) -> dict:
    return C.second_opinion(text, _me())
