"""Keep secrets out of fingerprints, logs and reports.

A value is secret when its variable's name looks like one (TOKEN, SECRET, KEY, PASSWORD, ...) or
when it is a URL carrying ``user:password@``.  Text is scrubbed of the literal values of secret
variables and of URL credentials.
"""
from __future__ import annotations

import os
import re
from typing import Mapping

REDACTED = "<redacted>"
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|(^|_)KEY($|_)|API_?KEY|PRIVATE|AUTH", re.I)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<cred>[^/@\s:]+:[^/@\s]+)@", re.I)


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
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    for value in secret_values(env):
        text = text.replace(value, REDACTED)
    return URL_CREDENTIALS.sub(lambda m: m["scheme"] + REDACTED + "@", text)
