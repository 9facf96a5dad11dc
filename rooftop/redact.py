"""Scrub secrets out of metadata before it is written into a trace.

Real traces carry environment dumps and command lines (a public H100 Kineto trace holds a Hugging
Face token in its metadata). Importers keep only the metadata rooftop needs, and pass what they keep
through `redact`: values under secret-looking keys and values shaped like known token formats become
"[redacted]", recursively, also inside longer strings such as `--token hf_...`.
"""
from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"TOKEN(?!IZER|S\b|S_)|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH(?!ORS?(?![A-Za-z]))",
    re.IGNORECASE)

# Token formats: Hugging Face, OpenAI, Anthropic, AWS access key ids, GitHub, Slack, JWTs.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{20,}"
    r"|sk-ant-[A-Za-z0-9_\-]{16,}"
    r"|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|gh[po]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[bp]-[A-Za-z0-9\-]{10,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r")")
# A cheap gate: only strings holding one of these prefixes go through the full pattern, so kernel
# names and paths (millions of them) cost one C-level scan each.
_PREFIX = re.compile(r"hf_|sk-|AKIA|gh[po]_|github_pat_|xox[bp]-|eyJ")
# `--token VALUE`, `--api-key=VALUE`, `HF_TOKEN=VALUE` inside a command line or env dump.
_FLAG = re.compile(
    r"((?:--?|\b)[A-Za-z0-9_\-]*(?:token|secret|password|passwd|api[_\-]?key|access[_\-]?key|"
    r"private[_\-]?key|credentials?|auth)(?:=|\s+))([^\s\"',;]+)", re.IGNORECASE)
_FLAG_GATE = re.compile(r"token|secret|passw|api.?key|access.?key|private.?key|credential|auth",
                        re.IGNORECASE)


def secret_key(key: str) -> bool:
    """True when a dictionary key names a secret (HF_TOKEN, aws_secret_access_key, Authorization...)."""
    return bool(_SECRET_KEY.search(key))


def redact_text(text: str) -> str:
    """Replace token-shaped substrings and the values of secret-named flags in one string."""
    if _PREFIX.search(text):
        text = _TOKEN.sub(REDACTED, text)
    if _FLAG_GATE.search(text):
        text = _FLAG.sub(lambda m: m.group(1) + REDACTED if m.group(2) != REDACTED else m.group(0), text)
    return text


def redact(obj: Any) -> Any:
    """A copy of `obj` (dicts, lists, tuples, strings) with secrets replaced by "[redacted]"."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            # Whole value, containers included; counts (`max_tokens: 128`) are not secrets.
            if isinstance(k, str) and secret_key(k) and v is not None and not isinstance(v, (bool, int, float)):
                out[k] = REDACTED
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(v) for v in obj)
    return obj


def redact_names(names: list) -> list:
    """Token-shaped substrings out of many names (kernel names, NVTX paths). Only the token formats
    apply here (a range named `token budget` is not a secret); non-strings pass through."""
    return [_TOKEN.sub(REDACTED, n) if isinstance(n, str) and _PREFIX.search(n) else n for n in names]
