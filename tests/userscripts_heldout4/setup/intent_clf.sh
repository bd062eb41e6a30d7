#!/usr/bin/env bash
# Synthetic intent-classification corpus: data/intents.jsonl  ({"text": ..., "label": ...} per line)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data/intents.jsonl" <<'PY'
import json, random, sys
random.seed(11)
intents = {
    "book_flight": ["book a flight to {c}", "i need a plane ticket to {c}", "fly me to {c} on {d}",
                    "any flights to {c} {d}", "reserve a seat to {c}"],
    "weather": ["what is the weather in {c}", "will it rain in {c} {d}", "forecast for {c}",
                "is it cold in {c} {d}", "how hot is {c}"],
    "alarm": ["set an alarm for {t}", "wake me up at {t}", "alarm at {t} {d}", "remind me at {t}",
              "cancel my {t} alarm"],
    "music": ["play some {g}", "put on {g} music", "i want to hear {g}", "shuffle my {g} playlist",
              "play {g} from {c}"],
    "restaurant": ["find a {g} restaurant in {c}", "table for two in {c} {d}", "book dinner at {t}",
                   "where can i eat {g} food", "reserve a table {d} at {t}"],
}
cities = ["paris", "tokyo", "berlin", "lima", "oslo", "cairo", "austin", "delhi", "rome", "seoul"]
days = ["today", "tomorrow", "on monday", "on friday", "this weekend", "next week"]
times = ["6am", "7 30", "noon", "9pm", "half past eight", "midnight"]
genres = ["jazz", "rock", "thai", "italian", "indie", "classical", "sushi", "blues"]
fill = ["please", "can you", "hey", "quickly", "", "", ""]
with open(sys.argv[1], "w") as fh:
    for _ in range(4000):
        label = random.choice(list(intents))
        text = random.choice(intents[label]).format(
            c=random.choice(cities), d=random.choice(days), t=random.choice(times), g=random.choice(genres))
        text = f"{random.choice(fill)} {text}".strip()
        fh.write(json.dumps({"text": text, "label": label}) + "\n")
print("wrote", sys.argv[1])
PY
