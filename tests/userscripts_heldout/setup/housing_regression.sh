#!/usr/bin/env bash
# Writes data/housing.csv for housing_regression.py
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
python3 - <<'PY'
import csv, math, random
rng = random.Random(42)
cols = ["sqft", "bedrooms", "bathrooms", "age", "lot", "dist_center", "garage", "price"]
with open("data/housing.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(cols)
    for _ in range(1001):
        sqft = rng.uniform(500, 4000)
        bed = rng.randint(1, 6)
        bath = rng.randint(1, 4)
        age = rng.uniform(0, 100)
        lot = rng.uniform(1000, 20000)
        dist = rng.uniform(0.5, 40)
        garage = rng.randint(0, 3)
        price = (120 * sqft + 9000 * bed + 12000 * bath - 800 * age + 2 * lot
                 - 3000 * dist + 7000 * garage + rng.gauss(0, 20000))
        w.writerow([round(v, 2) for v in (sqft, bed, bath, age, lot, dist, garage, price)])
PY
echo "rows: $(($(wc -l < data/housing.csv) - 1))"
