"""Minimal synchronous event bus."""
from __future__ import annotations

from collections import defaultdict


class EventBus:
    def __init__(self):
        self._subs = defaultdict(list)

    def on(self, event: str, fn=None):
        """Subscribe; usable as `bus.on("x", fn)` or as a decorator `@bus.on("x")`."""
        if fn is None:
            return lambda f: self.on(event, f)
        self._subs[event].append(fn)
        return fn

    def emit(self, event: str, **payload):
        out = []
        for fn in self._subs.get(event, ()):
            out.append(fn(**payload))
        return out
