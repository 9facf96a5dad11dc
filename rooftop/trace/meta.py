"""The metadata document of a trace: parsed from the file's footer, made strict JSON, conformed to the shape
the analysis reads."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Mapping

from rooftop import limits
from rooftop.trace.records import flat_text, plain_copy, strict
from rooftop.trace.schema import FORMAT_VERSION, META_KEY, TraceError, one_line


def _parse_meta(path: Path, raw: dict[bytes, bytes] | None, without: tuple[str, ...] = ()) -> dict[str, Any]:
    if not raw or META_KEY not in raw:
        raise TraceError(path, "Parquet file without rooftop metadata",
                         "not a rooftop trace; try `rooftop import` on the original file")
    try:
        meta = json.loads(raw[META_KEY].decode("utf-8", errors="replace"))
    except RecursionError:
        raise TraceError(path, f"rooftop metadata is nested too deep (more than {limits.MAX_META_DEPTH} levels)") from None
    except ValueError as exc:
        raise TraceError(path, f"rooftop metadata is not valid JSON ({one_line(exc, 80)})") from None
    if not isinstance(meta, dict):
        raise TraceError(path, "rooftop metadata is not a JSON object")
    for key in without:  # left out before the walk below (a 1M-kernel run's steps: ~0.1 s of it)
        meta.pop(key, None)
    meta = json_safe(meta, path)
    version = meta.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TraceError(path, f"rooftop metadata has no valid format version ({version!r})")
    if version > FORMAT_VERSION:
        raise TraceError(path, f"format version {version} is newer than this rooftop reads ({FORMAT_VERSION})",
                         "upgrade rooftop")
    if version < 1:
        raise TraceError(path, f"unknown format version {version}")
    return meta


def json_safe(obj: Any, path=None, depth: int = 0) -> Any:
    """The metadata as strict JSON: NaN/inf and integers beyond int64 become null (unknown), lone
    surrogates are replaced; deeper than `limits.MAX_META_DEPTH` levels is an error naming the file."""
    if depth > limits.MAX_META_DEPTH:
        raise TraceError(path, f"rooftop metadata is nested too deep (more than {limits.MAX_META_DEPTH} levels)")
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int):
        return obj if -(2 ** 63) <= obj < 2 ** 63 else None
    if isinstance(obj, str):
        return _no_surrogates(obj)
    if isinstance(obj, dict):
        return {_no_surrogates(str(k)): json_safe(v, path, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        text = flat_text(obj, allow_nan=False) if depth + 2 <= limits.MAX_META_DEPTH else None
        if text is not None and strict(text):  # thousands of step entries, checked in C (rooftop/trace/records.py)
            return plain_copy(text)
        return [json_safe(v, path, depth + 1) for v in obj]
    return str(obj)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_surrogates(text: str) -> str:
    """A lone surrogate (from a JSON `\\udcff` escape) is not text: U+FFFD, as a decoder would."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


# The shape every reader of the metadata relies on: sections are objects, lists are lists, names
# are text. A file written by another tool (or by hand) may hold anything under these keys.
_META_DICTS = ("source", "device", "model", "workload")
_META_SUBDICTS = {"device": ("peaks", "clocks")}
_META_TEXT = {"source": ("tool", "version"), "device": ("name", "cc"), "model": ("name", "dtype"),
              "workload": ("dtype", "kv_dtype", "attn", "device")}


_STEP_NUMBERS = ("index", "step", "batch", "new_tokens", "tokens", "context")


def _conform_step(step: dict) -> dict:
    out = dict(step)
    if out.get("phase") is not None and not isinstance(out["phase"], str):
        out["phase"] = None
    for k in _STEP_NUMBERS:
        v = out.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            out[k] = None
    return out


def conform_meta(meta: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of `meta` in the shape the analysis reads, and a warning per field that was ignored."""
    meta = dict(meta)
    bad: list[str] = []

    def want_dict(doc: dict, key: str, where: str) -> None:
        if key in doc and doc[key] is not None and not isinstance(doc[key], dict):
            bad.append(where)
            doc[key] = None

    for key in _META_DICTS:
        want_dict(meta, key, key)
        if isinstance(meta.get(key), dict):
            section = meta[key] = dict(meta[key])
            for sub in _META_SUBDICTS.get(key, ()):
                want_dict(section, sub, f"{key}.{sub}")
            for leaf in _META_TEXT.get(key, ()):
                v = section.get(leaf)
                if v is not None and not isinstance(v, str):
                    section[leaf] = str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    peaks = (meta.get("device") or {}).get("peaks")
    if isinstance(peaks, dict):
        peaks = meta["device"]["peaks"] = dict(peaks)
        for sub in ("datasheet", "measured"):
            want_dict(peaks, sub, f"device.peaks.{sub}")
    if meta.get("steps") is not None and not isinstance(meta["steps"], list):
        bad.append("steps")
        meta["steps"] = []
    elif isinstance(meta.get("steps"), list):
        meta["steps"] = [_conform_step(s) for s in meta["steps"] if isinstance(s, dict)]
    w = meta.get("warnings")
    if w is not None:
        meta["warnings"] = [str(x) for x in w] if isinstance(w, list) else [str(w)]
    warnings = [f"metadata field(s) of the wrong type ignored: {', '.join(bad)}"] if bad else []
    return meta, warnings
