"""User key remaps, read once at start-up: `$XDG_CONFIG_HOME/rooftop/keymap.toml`
(`~/.config/rooftop/keymap.toml` when XDG_CONFIG_HOME is unset), or the file `ROOFTOP_KEYMAP` names.

Each entry maps a binding id (the `?` help and README list them, e.g. `kernels.raw`) to the key or
keys that replace its default:

    [keys]
    "kernels.raw" = "r"
    "screen.kernels" = "k,3"

A file that cannot be read or parsed, or an entry that is not text, is reported on screen and left
out; the app starts with its default keys.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path


def keymap_path() -> Path:
    explicit = os.environ.get("ROOFTOP_KEYMAP")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rooftop" / "keymap.toml"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """({binding id: keys}, problems). No file: nothing to remap, no problem."""
    path = path or keymap_path()
    try:
        if not path.is_file():  # (raises when a parent cannot be searched: HOME of another user)
            return {}, []
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"{path}: cannot read the keymap ({' '.join(str(exc).split())}); default keys in use"]
    keys = doc.get("keys", doc)
    if not isinstance(keys, dict):
        return {}, [f"{path}: [keys] is not a table; default keys in use"]
    good = {str(k): v.strip() for k, v in keys.items() if isinstance(v, str) and v.strip()}
    bad = [str(k) for k, v in keys.items() if not (isinstance(v, str) and v.strip())]
    problems = [f"{path}: ignored entries that are not key text: {', '.join(bad)}"] if bad else []
    return good, problems
