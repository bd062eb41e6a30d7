"""Keep secrets out of fingerprints, logs and reports.

A value is secret when its variable's name looks like one (TOKEN, SECRET, KEY, PASSWORD, ...) or
when it is a URL carrying ``user:password@``.  Text is scrubbed of the literal values of secret
variables (also in their HTML- and JSON-escaped forms), of URL credentials, and of values given to
secret-looking command-line flags (``--hf-token X``, ``--password=X``) or assignments (``API_KEY=X``).
"""
from __future__ import annotations

import html
import json
import os
import re
from typing import Mapping

REDACTED = "<redacted>"
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|(^|_)KEY($|_)|API_?KEY|PRIVATE|AUTH", re.I)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<cred>[^/@\s:]+:[^/@\s]+)@", re.I)
_SECRET_WORD = r"(?:token|secret|passw(?:or)?d|api[-_]?key|access[-_]?key|credential|private[-_]?key)"
SECRET_FLAG = re.compile(r"(?P<name>(?<![\w-])--?[a-z0-9_-]*" + _SECRET_WORD + r"[a-z0-9_-]*)(?P<sep>=|\s+)(?P<value>[^\s'\"<>,;]+)",
                         re.I)
SECRET_ASSIGN = re.compile(r"(?P<name>\b[a-z0-9_]*" + _SECRET_WORD + r"[a-z0-9_]*)(?P<sep>=|: )(?P<value>[^\s'\"<>,;&]+)", re.I)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact_value(name: str, value: str) -> str:
    if is_secret_name(name):
        return REDACTED
    return URL_CREDENTIALS.sub(lambda m: m["scheme"] + REDACTED + "@", value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: redact_value(k, str(v)) for k, v in env.items()}


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Literal secret values worth scrubbing from free text (longest first, short ones skipped)."""
    env = os.environ if env is None else env
    vals = {v for k, v in env.items() if is_secret_name(k) and len(v) >= 4}
    vals |= {form for v in set(vals) for form in (html.escape(v), html.escape(v, quote=False), json.dumps(v)[1:-1])}
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str, env: Mapping[str, str] | None = None, marker: str = REDACTED, patterns: bool = True) -> str:
    """Scrub ``text``; ``marker`` replaces each secret (use ``&lt;redacted&gt;`` inside HTML).

    ``patterns=False`` keeps to literal env values and URL credentials (for whole HTML documents,
    whose CSS and scripts the flag and assignment patterns could mangle).
    """
    for value in secret_values(env):
        text = text.replace(value, marker)
    text = URL_CREDENTIALS.sub(lambda m: m["scheme"] + marker + "@", text)
    if patterns:
        keep = lambda m: m["value"] if m["value"] in (REDACTED, marker) else marker  # noqa: E731
        text = SECRET_FLAG.sub(lambda m: m["name"] + m["sep"] + keep(m), text)
        text = SECRET_ASSIGN.sub(lambda m: m["name"] + m["sep"] + keep(m), text)
    return text


def redact_obj(obj, env: Mapping[str, str] | None = None):
    """Redact every string inside nested dicts/lists (keys included)."""
    if isinstance(obj, str):
        return redact_text(obj, env)
    if isinstance(obj, dict):
        return {redact_text(str(k), env): redact_obj(v, env) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v, env) for v in obj]
    return obj
