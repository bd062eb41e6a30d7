#!/bin/bash
# Synthetic support tickets, one folder per topic.
set -e
cd "$(dirname "$0")/.."
"$PYTHON" - <<'PY'
import os, random
random.seed(7)
topics = {
    "billing": ["invoice", "charged", "refund", "payment", "credit card", "subscription"],
    "login": ["password", "reset", "locked out", "two factor", "username", "sign in"],
    "shipping": ["delivery", "tracking", "package", "courier", "late", "address"],
}
common = ["hello", "please", "help", "my", "the", "is", "not", "working", "since", "yesterday", "thanks"]
for t, words in topics.items():
    os.makedirs(f"data/tickets/{t}", exist_ok=True)
    with open(f"data/tickets/{t}/tickets.txt", "w") as f:
        for _ in range(400):
            ws = random.choices(common, k=random.randint(3, 7)) + random.choices(words, k=2)
            random.shuffle(ws)
            f.write(" ".join(ws) + "\n")
print("tickets written")
PY
