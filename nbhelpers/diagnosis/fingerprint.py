"""What a rank's machine looks like: versions, GPUs, /dev/shm, limits, interfaces, relevant env.

``collect()`` runs in a rank (the probe's first stage) or in the kernel; values that look secret
are redacted before anything leaves this module.
"""
from __future__ import annotations

import os
import platform
import resource
import shutil
import socket
from typing import Mapping

from nbhelpers.diagnosis.redact import redact_env

SHM_WARN_BYTES = 1 << 30
ENV_PREFIXES = ("NCCL_", "TORCH_", "GLOO_", "MASTER_", "CUDA_", "OMP_", "PYTORCH_", "TORCHELASTIC_")
ENV_NAMES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


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


def match_ifname(names: list[str], spec: str | None) -> list[str]:
    """Apply NCCL's ``*_SOCKET_IFNAME`` syntax: prefixes, ``=`` exact, ``^`` to exclude."""
    if not spec:
        return list(names)
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    body = body[1:] if exact else body
    wanted = [w for w in body.split(",") if w]
    hit = lambda n: any(n == w if exact else n.startswith(w) for w in wanted)  # noqa: E731
    return [n for n in names if hit(n) != exclude]


def nccl_would_pick(ifaces: list[dict], env: Mapping[str, str]) -> str:
    """NCCL's socket-interface choice: NCCL_SOCKET_IFNAME, else ib*, else not docker/lo, else lo."""
    up = [i["name"] for i in ifaces if i["up"] and i["addresses"]]
    spec = env.get("NCCL_SOCKET_IFNAME")
    if spec:
        got = match_ifname(up, spec)
        return ",".join(got) if got else f"none matches NCCL_SOCKET_IFNAME={spec}"
    for rule in ("ib", "^docker,lo,virbr", "docker", "lo"):
        got = match_ifname(up, rule)
        if got:
            return got[0]
    return "none"


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


def warnings(fp: dict) -> list[str]:
    out = []
    if fp.get("shm_free") is not None and fp["shm_free"] < SHM_WARN_BYTES:
        out.append(f"/dev/shm has {fp['shm_free'] / 2**20:.0f} MiB free (< 1 GiB): DataLoader workers fail once "
                   "their batches in flight outgrow it (bus error / 'unable to allocate shared memory'), and NCCL's "
                   "SHM transport can fail to set up; in a container raise --shm-size or use --ipc=host "
                   "(notebook 04 runs the same loader in a 1 MB and a 256 MB /dev/shm).")
    if str(fp.get("gloo_iface", "")).startswith("missing"):
        out.append(f"GLOO_SOCKET_IFNAME names no interface on this host ({fp['gloo_iface']}).")
    if str(fp.get("nccl_iface", "")).startswith("none matches"):
        out.append(f"NCCL_SOCKET_IFNAME matches no interface that is up ({fp['nccl_iface']}).")
    if "NCCL_TIMEOUT" in fp.get("env", {}):
        out.append("NCCL_TIMEOUT is set but no such variable exists: the timeout is init_process_group(timeout=...).")
    return out
