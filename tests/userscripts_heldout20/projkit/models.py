"""Model zoo + registry."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = {}


def register(name):
    def deco(cls):
        MODELS[name] = cls
        return cls
    return deco


def build(name, **kw) -> nn.Module:
    return MODELS[name](**kw)


@register("mlp")
class MLP(nn.Module):
    def __init__(self, d_in, d_out, hidden=(128, 128), dropout=0.1):
        super().__init__()
        layers, d = [], d_in
        for h in hidden:
            layers += [nn.Linear(d, h), nn.GELU(), nn.Dropout(dropout)]
            d = h
        layers.append(nn.Linear(d, d_out))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


@register("small_cnn")
class SmallCNN(nn.Module):
    def __init__(self, num_classes=10, width=32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


@register("bag_of_embeddings")
class BagClassifier(nn.Module):
    def __init__(self, vocab=500, dim=64, num_classes=6):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, num_classes))

    def forward(self, tokens):
        return self.head(self.emb(tokens))


@register("multitask")
class MultiTaskNet(nn.Module):
    """Shared trunk, a classification head and an auxiliary regression head that is
    only supervised on the annotated subset."""

    def __init__(self, d_in, hidden=128, num_classes=2):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, num_classes)
        self.aux_head = nn.Sequential(nn.Linear(hidden, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x, aux_mask=None):
        h = self.trunk(x)
        out = {"logits": self.head(h)}
        if aux_mask is not None and aux_mask.any():
            out["aux"] = self.aux_head(h[aux_mask]).squeeze(-1)
        return out


@register("tiny_lm")
class TinyCausalLM(nn.Module):
    def __init__(self, vocab=1024, d_model=256, n_layers=4, n_heads=4, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(max_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.tok(idx) + self.pos[:T]
        h = self.blocks(h, mask=mask, is_causal=True)
        return self.lm_head(self.norm(h))


@register("dense_gnn")
class DenseGNN(nn.Module):
    """Message passing on dense adjacency matrices (small molecules, <= 24 atoms)."""

    def __init__(self, d_atom=16, hidden=64, layers=3):
        super().__init__()
        self.inp = nn.Linear(d_atom, hidden)
        self.msg = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.upd = nn.ModuleList(nn.GRUCell(hidden, hidden) for _ in range(layers))
        self.readout = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, atoms, adj):
        B, N, _ = atoms.shape
        h = F.relu(self.inp(atoms))
        deg = adj.sum(-1, keepdim=True).clamp(min=1)
        for msg, upd in zip(self.msg, self.upd):
            m = torch.bmm(adj, msg(h)) / deg
            h = upd(m.reshape(B * N, -1), h.reshape(B * N, -1)).reshape(B, N, -1)
        return self.readout(h.mean(1)).squeeze(-1)


def init_weights(module: nn.Module, std: float = 0.02):
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=std / math.sqrt(2))
