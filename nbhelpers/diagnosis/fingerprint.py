"""What a machine's fingerprint means: NCCL's choice of socket interface (its ``*_SOCKET_IFNAME`` syntax), and the
warnings a fingerprint deserves.  :mod:`nbhelpers.runtime.fingerprint` takes the fingerprint (versions, GPUs,
/dev/shm, limits, interfaces, relevant env) of the machine it runs on.
"""
from __future__ import annotations

from typing import Mapping


SHM_WARN_BYTES = 1 << 30
ENV_PREFIXES = ("NCCL_", "TORCH_", "GLOO_", "MASTER_", "CUDA_", "OMP_", "PYTORCH_", "TORCHELASTIC_")
ENV_NAMES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


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
