"""Metric helpers shared by our text-classification jobs."""
import numpy as np
import torch
from sklearn.metrics import precision_recall_fscore_support


def per_class_scores(y_true, y_pred):
    """Per-class precision / recall / F1 / support for one shard of predictions."""
    p, r, f1, support = precision_recall_fscore_support(y_true, y_pred, zero_division=0)
    return {"precision": p, "recall": r, "f1": f1, "support": support}


def average_over_processes(accelerator, scores):
    """Average the per-class scores of every process (support is summed)."""
    out = {}
    for key in ("precision", "recall", "f1"):
        t = torch.as_tensor(np.asarray(scores[key], dtype=np.float32), device=accelerator.device)
        out[key] = accelerator.reduce(t, reduction="mean").cpu().numpy()
    sup = torch.as_tensor(np.asarray(scores["support"], dtype=np.int64), device=accelerator.device)
    out["support"] = accelerator.reduce(sup, reduction="sum").cpu().numpy()
    return out


def format_report(label_names, scores):
    lines = [f"{'label':>10} {'prec':>6} {'rec':>6} {'f1':>6} {'n':>5}"]
    for i, name in enumerate(label_names):
        lines.append(f"{name:>10} {scores['precision'][i]:6.3f} {scores['recall'][i]:6.3f} "
                     f"{scores['f1'][i]:6.3f} {int(scores['support'][i]):5d}")
    lines.append(f"{'macro':>10} {np.mean(scores['precision']):6.3f} {np.mean(scores['recall']):6.3f} "
                 f"{np.mean(scores['f1']):6.3f}")
    return "\n".join(lines)
