"""Prometheus-style metrics endpoint so the cluster dashboard can scrape the job."""
from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("mlcore.telemetry")


class _Registry:
    def __init__(self):
        self.values = {}
        self.lock = threading.Lock()

    def set(self, name, value, **labels):
        key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
        with self.lock:
            self.values[key] = value

    def render(self) -> bytes:
        with self.lock:
            return "".join(f"{k} {v}\n" for k, v in self.values.items()).encode()


REGISTRY = _Registry()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = REGISTRY.render()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class MetricsExporter:
    def __init__(self, host: str = "0.0.0.0", port: int = 9464):
        self.host, self.port = host, port
        self._server = None

    def start(self, world):
        self._server = ThreadingHTTPServer((self.host, self.port), _Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="metrics-http").start()
        log.info("%s: serving metrics on :%d", world.tag(), self.port)
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
