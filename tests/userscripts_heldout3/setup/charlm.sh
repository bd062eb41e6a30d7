#!/usr/bin/env bash
# Builds data/corpus/: six "field notes" text files plus a held-out file (synthetic, seeded).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
mkdir -p data/corpus
"$PYTHON" - <<'PY'
import random, os
rng = random.Random(7)
subjects = ["The river", "A heron", "The old mill", "Our guide", "The north ridge", "Fog", "A fox",
            "The weir", "Maria", "The ferryman", "Rain", "The lower meadow"]
verbs = ["crossed", "watched", "followed", "circled", "flooded", "climbed past", "waited by",
         "drifted over", "counted", "mapped"]
objects = ["the reed beds", "the eastern bank", "a line of poplars", "the stone bridge",
           "the sheep pens", "three moorhens", "the bend below the church", "the tow path",
           "the water meadows", "an abandoned boat"]
tails = ["before noon.", "at dusk.", "for an hour.", "in silence.", "again, slowly.",
         "while the wind dropped.", "(no tracks found).", "-- water level 1.4 m.", "; light rain."]
def para(n):
    return " ".join(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(tails)}"
                    for _ in range(n))
for i in range(6):
    with open(f"data/corpus/notes_{i:02d}.txt", "w", encoding="utf-8") as f:
        f.write(f"Day {i + 1}, {rng.choice(['Monday', 'Tuesday', 'Friday'])}\n\n")
        for _ in range(40):
            f.write(para(rng.randint(4, 8)) + "\n\n")
with open("data/corpus/heldout.txt", "w", encoding="utf-8") as f:
    for _ in range(6):
        f.write(para(6) + "\n\n")
print("corpus:", sorted(os.listdir("data/corpus")))
PY
