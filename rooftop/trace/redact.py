"""Scrub secrets out of every string a trace carries, before it is written, shown or analysed.

Real traces carry environment dumps and command lines (a public H100 Kineto trace holds a Hugging
Face token in its metadata), and a range or kernel name is whatever the program chose. Secrets
become "[redacted]":
- token shapes anywhere: Hugging Face `hf_`, GitHub `ghp_ gho_ ghs_ ghu_ ghr_ github_pat_`, GitLab
  `glpat-`, npm `npm_`, Slack `xox[abpr]-`, Stripe `sk_live_ rk_live_`, Google `AIza`, AWS key ids
  `AKIA/ASIA`, OpenAI/Anthropic `sk-`/`sk-ant-`, JWTs, `Bearer <token>`;
- the password of `scheme://user:password@host`;
- the value of a secret-named assignment or flag: `HF_TOKEN=...`, `MY_API_KEY: ...`,
  `"access_token": "..."`, `--token ...`, `aws_secret_access_key = ...`;
- in dictionaries (metadata), the whole value under a secret-named key.

Every pattern runs in linear time on hostile input (a 1 MB name): each starts at a literal or at
the start of an identifier run (a look-behind forbids starting inside one), and its body is one
character class taken possessively, so no start position is ever rescanned.
`rooftop.trace.scrubbing.scrub` is the one place every load and every import goes through.
"""
from __future__ import annotations

import re
from typing import Any

from rooftop.trace.records import flat_text, plain_copy

REDACTED = "[redacted]"

_SECRET_NAME = (r"TOKEN(?!IZER|S\b|S_)|SECRET|PASSWORD|PASSWD|API[_\-]?KEY|ACCESS[_\-]?KEY|PRIVATE[_\-]?KEY|CREDENTIAL|"
                r"AUTH(?!ORS?(?![A-Za-z]))")
_SECRET_KEY = re.compile(_SECRET_NAME, re.IGNORECASE)

# Token shapes. The look-behind keeps a token from starting inside a word (`mask-...` is no key),
# though `gemm_hf_...` is still a token. Each body is taken possessively and nothing follows it, so
# a failed attempt costs at most its minimum length; only the JWT has a suffix, and its stricter
# look-behind keeps it from starting inside the body of an earlier attempt (`-eyJ-eyJ-...`).
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{20,}+"
    r"|sk-ant-[A-Za-z0-9_\-]{16,}+"
    r"|sk-[A-Za-z0-9_\-]{20,}+"
    r"|[sr]k_live_[A-Za-z0-9]{10,}+"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"
    r"|gh[opsur]_[A-Za-z0-9]{20,}+"
    r"|github_pat_[A-Za-z0-9_]{20,}+"
    r"|glpat-[A-Za-z0-9_\-]{20,}+"
    r"|npm_[A-Za-z0-9]{30,}+"
    r"|xox[abpr]-[A-Za-z0-9\-]{10,}+"
    r"|AIza[0-9A-Za-z_\-]{30,}+"
    r")")
# A JWT (RFC 7519, compact form: base64url(header) "." base64url(payload) "." base64url(signature),
# the signature empty for alg "none"). Its header is JSON, so it starts `eyJ` (`{"`); the smallest
# header, `{"a":1}`, is 10 characters, the smallest payload `{}` is 3 (`e30`). It may sit inside
# a word (`gemm_eyJ...`): found from each `eyJ`, see `_jwts`.
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{7,}+\.[A-Za-z0-9_\-]{2,}+\.[A-Za-z0-9_\-]*+")
_JWT_RUN = re.compile(r"[A-Za-z0-9_\-]*+")
# An HTTP credential (RFC 6750 `Bearer`, RFC 7617 `Basic`, `Token`) after a space, a no-break space
# or a URL-encoded one; `Bearer` (never a word of a kernel name) also after `=` or `:`.
_BEARER = re.compile(r"(?<![A-Za-z0-9_])(Bearer(?:[ \t\u00a0=:]|%20)++|(?:Token|Basic)(?:[ \t\u00a0]|%20)++)"
                     r"([A-Za-z0-9._~+/\-]{8,}+=*+)", re.IGNORECASE)
# the password of a URL's userinfo (`https://user:pw@host`): starts right after `://`, bounded
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s:@]{1,256}+):([^/\s@]{1,1024}+)@")
# NAME=VALUE, NAME: VALUE, "NAME": "VALUE", --name VALUE: matched from each secret word found
# (`_SECRET_KEY`), never from every identifier, so prose and kernel names cost one scan.
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_RUN = re.compile(r"[A-Za-z0-9_\-]*+")
_REST = re.compile(r"[\"']?+(?:[ \t]*+([=:])[ \t]*+|([ \t]++))[\"']?+"
                   r"([^\s\"',;:=\[\]{}()<>]++)")
# A cheap gate (case-insensitive substrings): only strings holding one of these go through the
# patterns above. Also usable by Arrow (RE2) to filter a whole column at C speed.
GATE = (r"(?i)hf_|sk[-_]|rk_live|akia|asia|gh[opsur]_|github_pat_|glpat-|npm_|xox[abpr]-|aiza|eyj|"
        r"bearer|basic|://|token|secret|passw|api.?key|access.?key|private.?key|credential|auth")
_GATE = re.compile(GATE)
_JSON_STRING = re.compile(r'"([^"\\]*)"')  # a JSON string without escapes (keys and values alike)
_TOKEN_GATE = re.compile(r"hf_|sk-|[sr]k_live_|AKIA|ASIA|gh[opsur]_|github_pat_|glpat-|npm_|xox[abpr]-|AIza|eyJ")
_BEARER_GATE = re.compile(r"bearer|(?:token|basic)(?:[ \t\u00a0]|%20)", re.IGNORECASE)


def secret_key(key: str) -> bool:
    """True when a dictionary key names a secret (HF_TOKEN, aws_secret_access_key, Authorization...)."""
    return bool(_SECRET_KEY.search(key[:256]))


def _assignments(text: str) -> str:
    out, last, scanned = [], 0, 0
    for k in _SECRET_KEY.finditer(text):
        if k.start() < scanned:
            continue  # inside a name already looked at
        start = k.start()
        floor = max(scanned, start - 128)
        while start > floor and text[start - 1] in _NAME_CHARS:
            start -= 1
        end = _RUN.match(text, k.end()).end()
        scanned = end
        m = _REST.match(text, end)
        if m is None:
            continue
        name, value = text[start:end], m.group(3)
        if m.group(2) and not name.startswith("-"):
            continue  # `token budget`: a word then a space is prose; `--token VALUE` is a flag
        if m.start(3) < last or value == REDACTED or value.isdigit() or not _SECRET_KEY.search(name):
            continue  # `max_tokens=128`, `tokenizer=llama`: not secrets
        out += [text[last:m.start(3)], REDACTED]
        last = scanned = m.end(3)
    return "".join(out) + text[last:] if out else text


def _jwts(text: str) -> str:
    """`text` with every JWT replaced, wherever it starts (also inside a word). Linear: a failed
    attempt scans the rest of its run of base64url characters once, and no later `eyJ` of that run
    is tried (it would meet the same end, hence fail the same way)."""
    out, last, scanned = [], 0, 0
    pos = text.find("eyJ")
    while pos >= 0:
        if pos >= scanned:
            m = _JWT.match(text, pos)
            if m is not None:
                out += [text[last:pos], REDACTED]
                last = scanned = m.end()
            else:
                scanned = _JWT_RUN.match(text, pos).end()
        pos = text.find("eyJ", max(pos + 3, scanned))
    return "".join(out) + text[last:] if out else text


def redact_text(text: str) -> str:
    """Replace token-shaped substrings, URL passwords and the values of secret-named assignments."""
    if not _GATE.search(text):
        return text
    if _TOKEN_GATE.search(text):
        text = _TOKEN.sub(REDACTED, text)
        if "eyJ" in text:
            text = _jwts(text)
    if _BEARER_GATE.search(text):
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m.group(1) + ":" + REDACTED + "@", text)
    return _assignments(text)


def redact(obj: Any, _depth: int = 0) -> Any:
    """A copy of `obj` (dicts, lists, tuples, strings) with secrets replaced by "[redacted]".
    Keys are scrubbed too (a token can be a key). Nesting beyond 200 levels is cut (the JSON
    decoder already refuses deeper documents; this keeps the walk bounded whatever the caller)."""
    return _Redactor().walk(obj, _depth)


class _Redactor:
    """One `redact` walk. Each distinct string and key is judged once: a 1M-kernel import's metadata
    holds ~3,500 steps of the same seven keys and a handful of values (~50k strings, ~7k distinct)."""

    def __init__(self):
        self.texts: dict[str, str] = {}
        self.keys: dict[str, tuple[str, bool]] = {}

    def text(self, s: str) -> str:
        out = self.texts.get(s)
        if out is None:
            out = self.texts[s] = redact_text(s)
        return out

    def key(self, k: str) -> tuple[str, bool]:
        out = self.keys.get(k)
        if out is None:
            out = self.keys[k] = (self.text(k), secret_key(k))
        return out

    def walk(self, obj: Any, depth: int) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if depth > 200:
            return None
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                key, secret = self.key(k) if isinstance(k, str) else (k, False)
                # Whole value, containers included; counts (`max_tokens: 128`) are not secrets.
                if secret and v is not None and not isinstance(v, (bool, int, float)):
                    out[key] = REDACTED
                else:
                    out[key] = self.walk(v, depth + 1)
            return out
        if isinstance(obj, (list, tuple)):
            # thousands of flat step entries (a handful of distinct keys and labels): each distinct
            # string of their JSON text judged once, and where none is or names a secret, a copy in C
            text = flat_text(obj, allow_nan=True)
            if text is not None and "\\" not in text:  # (no escapes: every string is one match below)
                if all(self.text(t) == t and not secret_key(t) for t in set(_JSON_STRING.findall(text))):
                    return plain_copy(text)
            return type(obj)(self.walk(v, depth + 1) for v in obj)
        return obj


def redact_names(names: list) -> list:
    """`redact_text` over many names (kernel names, NVTX paths, ops); non-strings pass through."""
    return [redact_text(n) if isinstance(n, str) else n for n in names]
