#!/usr/bin/env bash
# Recreates the small intent-classification corpus used by train_intent_lightning.py
set -euo pipefail
PYTHON="${PYTHON:-python3}"
mkdir -p data
"$PYTHON" - <<'PY'
import json, random
rng = random.Random(7)
cities = ["paris", "berlin", "madrid", "rome", "oslo", "lisbon", "vienna", "prague", "dublin", "athens",
          "warsaw", "zurich", "geneva", "milan", "munich", "lyon", "porto", "seville", "krakow", "riga"]
days = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "tomorrow", "tonight"]
templates = {
    "book_flight": ["book a flight to {c} on {d}", "i need a ticket from {c} to {c2}", "fly me to {c} {d} please"],
    "cancel_booking": ["cancel my trip to {c}", "please cancel the {d} booking", "drop my reservation for {c}"],
    "flight_status": ["is the {c} flight on time", "status of my flight to {c} {d}", "has the plane from {c} landed"],
    "change_seat": ["move me to a window seat on the {c} flight", "can i change my seat for {d}", "aisle seat to {c} please"],
    "baggage": ["how many bags can i take to {c}", "my luggage for {d} is overweight", "add a checked bag to the {c} trip"],
    "refund": ["i want my money back for {c}", "refund the {d} ticket", "how long does a refund for {c} take"],
}
def row(intent):
    t = rng.choice(templates[intent])
    return {"text": t.format(c=rng.choice(cities), c2=rng.choice(cities), d=rng.choice(days)), "intent": intent}
train = [row(rng.choice(list(templates))) for _ in range(640)]
# the new "lost_item" intent was only added to the annotation guide last week
train.append({"text": "i left my laptop on the flight from oslo", "intent": "lost_item"})
rng.shuffle(train)
val = [row(rng.choice(list(templates))) for _ in range(160)]
for name, rows in (("train", train), ("val", val)):
    with open(f"data/{name}.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
print(f"wrote {len(train)} train / {len(val)} val rows to data/")
PY
