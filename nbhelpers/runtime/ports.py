"""Rendezvous ports: find a free one, and check a chosen one before launching on it."""
from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_owner(port: int) -> str | None:
    """``'python (pid 123)'`` for the process listening on ``port``, if psutil can see it."""
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    for c in conns:
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN:
            if c.pid is None:
                return "another process"
            try:
                return f"{psutil.Process(c.pid).name()} (pid {c.pid})"
            except psutil.Error:
                return f"pid {c.pid}"
    return None


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something listens on host:port or the port cannot be bound."""
    with socket.socket() as s:
        s.settimeout(0.5)
        if s.connect_ex((host, port)) == 0:
            return True
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def check_port(port: int, host: str = "127.0.0.1") -> None:
    from nbhelpers.errors import PortInUseError

    if port_in_use(port, host):
        raise PortInUseError(host, port, port_owner(port))
