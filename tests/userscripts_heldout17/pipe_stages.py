"""Stage definitions and the p2p plumbing for the two-stage housing pipeline.

Kept in a separate module so the stages can be unit-tested on one process
without a process group.
"""
import torch
import torch.nn as nn
import torch.distributed as dist


class StraightThroughClamp(torch.autograd.Function):
    """Clamp activations on the way forward, pass gradients straight through.

    The boundary activations are shipped between processes, so we keep them in
    a bounded range; clamping with the normal autograd rule would zero the
    gradient for saturated units and stall the head stage early in training.
    """

    @staticmethod
    def forward(ctx, x, lo, hi):
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out, None, None


class HeadStage(nn.Module):
    def __init__(self, in_features, hidden, boundary):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, boundary),
        )

    def forward(self, x):
        return StraightThroughClamp.apply(self.net(x), -4.0, 4.0)


class TailStage(nn.Module):
    def __init__(self, boundary, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(boundary),
            nn.Linear(boundary, hidden), nn.GELU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, h):
        return self.net(h).squeeze(-1)


# tags keep the activation and gradient streams apart on the same pair
ACT_TAG = 100
GRAD_TAG = 200


class P2PLink:
    """Thin wrapper so the training loop reads as send/recv of named streams."""

    def __init__(self, peer, boundary):
        self.peer = peer
        self.boundary = boundary
        self._pending = []

    def post_activation(self, t, mb):
        self._pending.append(dist.isend(t.detach().contiguous(), self.peer, tag=ACT_TAG + mb))

    def post_grad(self, t, mb):
        self._pending.append(dist.isend(t.contiguous(), self.peer, tag=GRAD_TAG + mb))

    def recv_activation(self, rows, mb):
        buf = torch.empty(rows, self.boundary)
        dist.irecv(buf, self.peer, tag=ACT_TAG + mb).wait()
        return buf

    def recv_grad(self, rows, mb):
        buf = torch.empty(rows, self.boundary)
        dist.recv(buf, self.peer, tag=GRAD_TAG + mb)
        return buf

    def drain(self):
        for w in self._pending:
            w.wait()
        self._pending.clear()
