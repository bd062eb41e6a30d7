"""This machine's fingerprint: versions, GPUs, /dev/shm, limits, interfaces, relevant env.

``collect()`` runs in a rank (the probe's first stage) or in the kernel; values that look secret are redacted before
anything leaves this module.  What the fingerprint means (warnings, NCCL's interface choice) is in
:mod:`nbhelpers.diagnosis.fingerprint`.
"""
from __future__ import annotations

import os
import platform
import resource
import shutil
import socket
from typing import Mapping

from nbhelpers.diagnosis.fingerprint import ENV_NAMES, ENV_PREFIXES, nccl_would_pick, warnings
from nbhelpers.diagnosis.lint import Finding
from nbhelpers.diagnosis.lint import lint_env as _lint_env
from nbhelpers.diagnosis.redact import redact_env

__all__ = ["collect", "gloo_would_pick", "interfaces", "lint_env", "torch_info"]


def _limit(which: int) -> str:
    soft, hard = resource.getrlimit(which)
    fmt = lambda v: "unlimited" if v == resource.RLIM_INFINITY else str(v)  # noqa: E731
    return f"{fmt(soft)} (hard {fmt(hard)})"


def interfaces() -> list[dict]:
    """Interfaces that are up, with IPv4/IPv6 addresses and MTU (psutil)."""
    import psutil

    stats = psutil.net_if_stats()
    out = []
    for name, addrs in sorted(psutil.net_if_addrs().items()):
        st = stats.get(name)
        ips = [a.address.split("%")[0] for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)]
        out.append({"name": name, "up": bool(st and st.isup), "mtu": st.mtu if st else None, "addresses": ips})
    return out


def gloo_would_pick(ifaces: list[dict], env: Mapping[str, str]) -> str:
    """Gloo: GLOO_SOCKET_IFNAME, else the interface holding the hostname's address, else loopback."""
    spec = env.get("GLOO_SOCKET_IFNAME")
    names = {i["name"] for i in ifaces}
    if spec:
        missing = [n for n in spec.split(",") if n not in names]
        return f"missing: {','.join(missing)}" if missing else spec
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        addrs = set()
    for i in ifaces:
        if addrs & set(i["addresses"]):
            return i["name"]
    return "lo (fallback: hostname does not resolve to a local address)"


def torch_info() -> dict:
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": torch.cuda.device_count() if cuda else 0,
        "gpu_names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
        "nccl": None,
        "gloo": dist.is_available() and dist.is_gloo_available(),
    }
    if cuda and dist.is_nccl_available():
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    return info


def collect(env: Mapping[str, str] | None = None, with_torch: bool = True) -> dict:
    env = os.environ if env is None else env
    shm = shutil.disk_usage("/dev/shm") if os.path.isdir("/dev/shm") else None
    ifaces = interfaces()
    fp = {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "shm_total": shm.total if shm else None,
        "shm_free": shm.free if shm else None,
        "memlock": _limit(resource.RLIMIT_MEMLOCK),
        "nofile": _limit(resource.RLIMIT_NOFILE),
        "interfaces": ifaces,
        "gloo_iface": gloo_would_pick(ifaces, env),
        "nccl_iface": nccl_would_pick(ifaces, env),
        "env": redact_env({k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}),
    }
    if with_torch:
        fp.update(torch_info())
    fp["warnings"] = warnings(fp)
    return fp


def lint_env(env: Mapping[str, str] | None = None, interfaces: list[dict] | None = None) -> list[Finding]:
    """:func:`nbhelpers.diagnosis.lint.lint_env` against this host's interfaces (read only if an *_SOCKET_IFNAME
    variable is set) unless ``interfaces`` are given."""
    host = globals()["interfaces"]  # this module's function, which the parameter's name hides here
    return _lint_env(env, interfaces=host if interfaces is None else interfaces)
