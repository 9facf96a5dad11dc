"""docs/architecture.md names every Python module under rooftop/, rooftop_cli/, collectors/ and tui/, so that a
newcomer finds each one's room there. The convention (stated at the top of the doc's Rooms): a
module by its path from the repository root in backticks (`rooftop/analysis/gap.py`), a package's
`__init__.py` by its folder (`rooftop/analysis/`)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rooftop", "rooftop_cli", "collectors", "tui")


def _modules() -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT).as_posix()
            out.append(rel[: -len("__init__.py")] if path.name == "__init__.py" else rel)
    return out


def test_every_module_is_named_in_the_architecture_doc():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([^`\s]+)`", text))
    missing = [m for m in _modules() if m not in named]
    assert not missing, ("docs/architecture.md does not name these modules (write each as its path in "
                         "backticks, a package as its folder with a trailing /):\n  " + "\n  ".join(missing))


def test_every_module_the_doc_names_exists():
    """The other way round: a path in the doc under these folders that is no longer there (a module
    moved or deleted) is a stale room."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:rooftop|rooftop_cli|collectors|tui)/[^`\s]*\.py)`", text))
    stale = sorted(p for p in named if not (ROOT / p).is_file())
    assert not stale, "docs/architecture.md names modules that do not exist:\n  " + "\n  ".join(stale)
