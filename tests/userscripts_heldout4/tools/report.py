#!/usr/bin/env python
"""Summarise a run's metrics.jsonl into report.md (called by the trainer after each validation)."""
import argparse
import json
import os

p = argparse.ArgumentParser()
p.add_argument("run_dir")
args = p.parse_args()

rows = []
with open(os.path.join(args.run_dir, "metrics.jsonl")) as f:
    for line in f:
        if line.strip():
            rows.append(json.loads(line))

train = [r for r in rows if "train/loss" in r]
val = [r for r in rows if "val/acc" in r]
best = max(val, key=lambda r: r["val/acc"])

lines = [f"# {os.path.basename(os.path.normpath(args.run_dir))}", "",
         f"best val/acc {best['val/acc']:.4f} at epoch {best['epoch']} (step {best['step']})", "",
         "| epoch | step | val/loss | val/acc | val/acc (ema) |", "|---|---|---|---|---|"]
for r in val:
    lines.append(f"| {r['epoch']} | {r['step']} | {r['val/loss']:.4f} | {r['val/acc']:.4f} | {r.get('val/acc_ema', float('nan')):.4f} |")
if train:
    lines += ["", f"last train/loss {train[-1]['train/loss']:.4f} at step {train[-1]['step']}"]
with open(os.path.join(args.run_dir, "report.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"report: {len(val)} evals, best val/acc {best['val/acc']:.4f}")
