"""Lint the environment a distributed PyTorch job inherits.

``lint_env()`` looks only at variables that matter to distributed PyTorch: names with the prefixes
NCCL_, TORCH_NCCL_, TORCH_DISTRIBUTED_ and GLOO_, names in ``envcatalog.CATALOG`` and the known-wrong
names (such as NCCL_TIMEOUT).  Everything else in the environment is ignored.  Rules:

* ``wrong-name`` (error): a name from bad advice that nothing reads (NCCL_TIMEOUT, ...).
* ``retired`` (warning): a name NCCL renamed or removed.
* ``unknown-name`` (warning): a checked prefix but not a documented variable; with a close match.
* ``deprecated`` (warning): an old name still read; says which wins when the new one is set too.
* ``obsolete`` (info): still accepted, but no longer does anything useful.
* ``debug-setting`` (info/warning): a debugging setting left on (NCCL_P2P_DISABLE=1, ...).
* ``bad-value`` (error/warning): not an integer, not an accepted value, out of range, RANK >= WORLD_SIZE.
* ``ifname`` (error/warning): NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME naming no interface on this host.

Values whose variable looks secret are redacted (``redact.redact_value``) before they reach a finding.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from typing import Callable, Literal, Mapping

from nbhelpers.diagnosis import envcatalog as ec
from nbhelpers.diagnosis import fingerprint
from nbhelpers.diagnosis.redact import redact_value

Level = Literal["error", "warning", "info"]
CHECKED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "GLOO_")
_ORDER = {"error": 0, "warning": 1, "info": 2}
_INT = re.compile(r"[+-]?\d+")
_HEX = re.compile(r"[+-]?0[xX][0-9a-fA-F]+")
_TRUE = {"1", "y", "yes", "t", "true"}


@dataclass(frozen=True)
class Finding:
    name: str
    value: str
    level: Level
    rule: str
    message: str
    fix: str


def _is_checked(name: str) -> bool:
    return name.startswith(CHECKED_PREFIXES) or name in ec.CATALOG or ec.wrong_name(name) is not None


def _norm(var: ec.EnvVar, value: str) -> str:
    return value if var.case_sensitive else value.upper()


def _as_int(name: str, value: str) -> int | None:
    if _INT.fullmatch(value):
        return int(value)
    if name.startswith("NCCL_") and _HEX.fullmatch(value):  # NCCL uses strtoll(..., 0): hex is fine
        return int(value, 16)
    return None


def _int_parser_note(name: str) -> str:
    if name.startswith("NCCL_"):
        return ("NCCL's parameter reader (strtoll in src/misc/param.cc) raises no error: it keeps the "
                "leading digits and reads text without digits as 0, so the setting silently means "
                "something else.")
    if name.startswith(("TORCH_NCCL_", "TORCH_FR_")):
        return ("PyTorch reads it with std::stoi (getCvarInt): '1.5' silently becomes 1, and text without "
                "leading digits raises 'Invalid value for environment variable' when the process group is "
                "created.")
    return "It must be a whole number."


def _closest(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The choice closest to ``word`` (ignoring case), if it is close enough to be a likely typo."""
    folded = {c.upper(): c for c in choices}
    got = difflib.get_close_matches(word.upper(), list(folded), n=1, cutoff=0.8)
    return folded[got[0]] if got else None


def _value_problem(var: ec.EnvVar, value: str) -> tuple[Level, str, str] | None:
    """(level, message, fix) when ``value`` is not acceptable for ``var``; None when it is."""
    name, shown = var.name, redact_value(var.name, value)
    consequence = f" {var.on_bad_value}" if var.on_bad_value else ""
    if var.type in ("int", "port"):
        number = _as_int(name, value)
        if number is None:
            return ("error", f"{name}={shown} is not an integer. {_int_parser_note(name)}",
                    f"Set {name} to a whole number{_range_words(var)}, or unset it"
                    f"{' (default ' + var.default + ')' if var.default is not None else ''}.")
        if (var.minimum is not None and number < var.minimum) or (var.maximum is not None and number > var.maximum):
            extra = f" {var.note}" if var.note else ""
            return ("error", f"{name}={shown} is outside the valid range{_range_words(var)}.{extra}",
                    f"Use a value{_range_words(var)}.")
        return None
    if var.type == "bool":
        if _norm(var, value) in {_norm(var, a) for a in var.allowed}:
            return None
        spelled = ", ".join(var.allowed)
        return ("error", f"{name}={shown} is not a boolean this variable understands (accepted: {spelled})."
                         f"{consequence}", f"Set {name}=1 to turn it on or 0 to turn it off.")
    if var.type == "enum":
        if _norm(var, value) in {_norm(var, a) for a in var.allowed}:
            return None
        if var.allow_int and _INT.fullmatch(value) and int(value) >= 0:
            return None
        near = _closest(value, var.allowed)
        hint = f" Did you mean {near}?" if near else ""
        return ("error", f"{name}={shown} is not one of {', '.join(var.allowed)}.{hint}{consequence}",
                f"Set {name} to one of: {', '.join(var.allowed)}.")
    if var.type == "list":
        tokens = [t.strip().lstrip("^") for t in value.split(",") if t.strip()]
        known = {_norm(var, a) for a in var.allowed}
        bad = [t for t in tokens if _norm(var, t) not in known]
        if bad:
            return ("warning", f"{name} contains {', '.join(redact_value(name, b) for b in bad)}, which "
                               f"{'is' if len(bad) == 1 else 'are'} not among the documented names "
                               f"({', '.join(var.allowed)}), so that part of the log will not appear.",
                    f"Use names from: {', '.join(var.allowed)}.")
    return None


def _range_words(var: ec.EnvVar) -> str:
    if var.minimum is not None and var.maximum is not None:
        return f" from {var.minimum} to {var.maximum}"
    if var.minimum is not None:
        return f" of at least {var.minimum}"
    if var.maximum is not None:
        return f" of at most {var.maximum}"
    return ""


def _debug_on(var: ec.EnvVar, value: str) -> bool:
    if not var.debug_only or not value:
        return False
    if var.debug_values:
        wanted = {_norm(var, v) for v in var.debug_values}
        if var.type == "list":
            return any(_norm(var, t.strip()) in wanted for t in value.split(","))
        return _norm(var, value) in wanted
    if var.type == "bool":
        return value.strip().lower() in _TRUE
    return True


def _ifname_findings(name: str, value: str, ifaces: list[dict]) -> list[Finding]:
    shown = redact_value(name, value)
    names = [i["name"] for i in ifaces]
    usable = {i["name"] for i in ifaces if i.get("up") and i.get("addresses")}
    listing = ", ".join(names) or "none"
    everywhere = "Interface names differ between machines: run this check on every node."
    if name == "GLOO_SOCKET_IFNAME":
        wanted = [w for w in value.split(",") if w]
        missing = [w for w in wanted if w not in names]
        if missing:
            return [Finding(name, shown, "error", "ifname",
                            f"GLOO_SOCKET_IFNAME names {', '.join(missing)}, which "
                            f"{'does' if len(missing) == 1 else 'do'} not exist on this host (interfaces: "
                            f"{listing}). Gloo takes exact names, comma-separated, and fails to create its "
                            f"device for a missing one.",
                            f"Set GLOO_SOCKET_IFNAME to the exact name of the interface that routes between "
                            f"the nodes (one of: {listing}). {everywhere}")]
        dead = [w for w in wanted if w not in usable]
        if dead:
            return [Finding(name, shown, "warning", "ifname",
                            f"GLOO_SOCKET_IFNAME names {', '.join(dead)}, which exist but are down or have no "
                            f"IP address.", f"Bring the interface up or pick one that is up. {everywhere}")]
        return []
    matched = fingerprint.match_ifname(names, value)
    if not matched:
        return [Finding(name, shown, "error", "ifname",
                        f"{name}={shown} matches no interface on this host (interfaces: {listing}). NCCL's "
                        f"syntax is comma-separated prefixes, '=' for exact names and '^' to exclude; with no "
                        f"match NCCL finds no socket interface and cannot bootstrap.",
                        f"Fix the prefix (e.g. {name}={names[0] if names else 'eth0'}) or unset it to let "
                        f"NCCL choose. {everywhere}")]
    if not usable.intersection(matched):
        return [Finding(name, shown, "warning", "ifname",
                        f"{name}={shown} matches {', '.join(matched)}, but none of them is up with an IP "
                        f"address.", f"Bring the interface up or choose one that is up. {everywhere}")]
    return []


def _lint_one(name: str, value: str, env: Mapping[str, str], get_ifaces) -> list[Finding]:
    shown = redact_value(name, value)
    wrong = ec.wrong_name(name)
    if wrong is not None:
        if wrong.retired:
            return [Finding(name, shown, "warning", "retired", f"{name}: {wrong.why} Setting it has no effect.",
                            wrong.instead)]
        return [Finding(name, shown, "error", "wrong-name", f"{name}: {wrong.why}", wrong.instead)]
    var = ec.lookup(name)
    if var is None:
        if name in ec.OTHER_KNOWN or not name.startswith(CHECKED_PREFIXES):
            return []
        near = _closest(name, list(ec.CATALOG) + list(ec.OTHER_KNOWN))
        hint = f" Did you mean {near}?" if near else ""
        return [Finding(name, shown, "warning", "unknown-name",
                        f"{name} is not a variable NCCL or PyTorch documents (checked against NCCL 2.30 and "
                        f"PyTorch 2.13), so it is probably ignored.{hint}",
                        f"Rename it to {near}." if near else
                        "Check the spelling against the NCCL env page and the PyTorch docs, or remove it.")]
    out: list[Finding] = []
    if var.deprecated_alias_of:
        new = var.deprecated_alias_of
        final = new
        while (nxt := ec.CATALOG[final].deprecated_alias_of) and nxt != name:
            final = nxt
        message = f"{name} is a deprecated name for {new}."
        if var.note:
            message += f" {var.note}"
        fix = f"Rename {name} to {final} (same value)."
        if final != new:
            fix += f" {new} is deprecated too."
        if new in env:
            if env[new] != value:
                message += (f" {new} is also set, to a different value ({redact_value(new, env[new])}): "
                            f"{var.both_set}")
            else:
                message += f" {new} is also set, to the same value."
            fix = f"Remove {name} and keep {new}."
        out.append(Finding(name, shown, "warning", "deprecated", message, fix))
    if var.obsolete:
        out.append(Finding(name, shown, "info", "obsolete", f"{name}: {var.obsolete}", f"Remove {name}."))
    if value == "":
        return out  # set but empty: NCCL and PyTorch treat it as unset
    problem = _value_problem(var, value)
    if problem is not None:
        level, message, fix = problem
        out.append(Finding(name, shown, level, "bad-value", message, fix))
        if level == "error":
            return out
    if _debug_on(var, value):
        default = (f" (default {var.default})" if var.default is not None
                   else f" ({var.default_note})" if var.default_note else "")
        out.append(Finding(name, shown, var.debug_level, "debug-setting", f"{name}={shown}: {var.debug_why}",
                           f"Unset {name} once the problem is found{default}."))
    if var.type == "ifname" and (ifaces := get_ifaces()) is not None:
        out.extend(_ifname_findings(name, value, ifaces))
    return out


def _cross_checks(env: Mapping[str, str]) -> list[Finding]:
    rank, size = env.get("RANK", ""), env.get("WORLD_SIZE", "")
    if _INT.fullmatch(rank) and _INT.fullmatch(size) and int(size) >= 1 and int(rank) >= int(size):
        return [Finding("RANK", rank, "error", "bad-value",
                        f"RANK={rank} but WORLD_SIZE={size}: ranks run from 0 to WORLD_SIZE-1, so this rank "
                        f"waits at the rendezvous for a job it is not part of.",
                        "Fix RANK/WORLD_SIZE (let torchrun set them rather than exporting them by hand).")]
    return []


def lint_env(env: Mapping[str, str] | None = None,
             interfaces: list[dict] | Callable[[], list[dict]] | None = None) -> list[Finding]:
    """Findings for ``env`` (default: ``os.environ``), errors first.

    ``interfaces`` are dicts like :func:`nbhelpers.runtime.fingerprint.interfaces` returns (name, up, mtu,
    addresses), or a function that reads them, called only if an *_SOCKET_IFNAME variable is set; with None
    those variables' interface names are not checked (``nbhelpers.lint_env`` checks them against this host).
    """
    env = os.environ if env is None else env
    cache: list[list[dict]] = []

    def get_ifaces() -> list[dict] | None:
        if interfaces is None:
            return None
        if not cache:
            cache.append(list(interfaces() if callable(interfaces) else interfaces))
        return cache[0]

    findings: list[Finding] = []
    for name in sorted(env):
        if _is_checked(name):
            findings.extend(_lint_one(name, str(env[name]), env, get_ifaces))
    findings.extend(_cross_checks(env))
    return sorted(findings, key=lambda f: (_ORDER[f.level], f.name, f.rule))
