#!/usr/bin/env bash
# Builds data/churn.csv: a small synthetic customer-churn table.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import csv, random
random.seed(7)
plans = ["basic", "plus", "pro"]
with open("data/churn.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["tenure", "monthly", "support_calls", "usage_gb", "age", "discount", "plan", "churn"])
    for i in range(6000):
        tenure = random.randint(1, 72)
        monthly = round(random.uniform(10, 120), 2)
        calls = random.randint(0, 9)
        usage = round(random.expovariate(1 / 30), 2)
        age = random.randint(18, 80)
        disc = random.choice([0, 5, 10, 15])
        plan = random.choice(plans)
        score = 0.04 * calls - 0.02 * tenure + 0.01 * monthly - 0.03 * disc + (0.5 if plan == "basic" else 0)
        churn = 1 if score + random.gauss(0, 0.5) > 0.3 else 0
        w.writerow([tenure, monthly, calls, usage, age, disc, plan, churn])
print("wrote data/churn.csv")
PY
