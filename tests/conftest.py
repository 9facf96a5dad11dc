"""Shared fixtures. `fixtures_dir`: the real third-party files of ../shared/fixtures (or
$ROOFTOP_FIXTURES). Tests that need them skip when the folder is absent, unless
ROOFTOP_REQUIRE_FIXTURES=1 (set by .ci/run), which turns the skip into a failure."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _fixtures_path() -> Path:
    env = os.environ.get("ROOFTOP_FIXTURES")
    return Path(env) if env else PROJECT_ROOT.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    path = _fixtures_path()
    if not path.is_dir():
        reason = f"third-party fixtures not found at {path} (set ROOFTOP_FIXTURES)"
        if os.environ.get("ROOFTOP_REQUIRE_FIXTURES") == "1":
            pytest.fail(f"ROOFTOP_REQUIRE_FIXTURES=1 but {reason}")
        pytest.skip(reason)
    return path
