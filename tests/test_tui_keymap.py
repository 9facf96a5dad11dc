"""Remapped keys from the keymap file, loaded at start-up; a broken file is reported, not fatal."""
from __future__ import annotations

from tui.keymap import keymap_path, load_keymap

from test_tui_app import drive
from tui_helpers import small_trace


def test_keymap_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("ROOFTOP_KEYMAP", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert keymap_path() == tmp_path / "rooftop" / "keymap.toml"
    monkeypatch.setenv("ROOFTOP_KEYMAP", str(tmp_path / "mine.toml"))
    assert keymap_path() == tmp_path / "mine.toml"


def test_load_keymap_reports_what_it_ignores(tmp_path):
    f = tmp_path / "k.toml"
    f.write_text('[keys]\n"kernels.raw" = "r"\n"kernels.sort" = 3\n')
    keys, problems = load_keymap(f)
    assert keys == {"kernels.raw": "r"} and "kernels.sort" in problems[0]
    f.write_text("[keys\n")
    keys, problems = load_keymap(f)
    assert keys == {} and "cannot read the keymap" in problems[0]
    assert load_keymap(tmp_path / "none.toml") == ({}, [])


def test_remapped_key_works_in_the_app(tmp_path, monkeypatch):
    f = tmp_path / "keymap.toml"
    f.write_text('[keys]\n"kernels.raw" = "r"\n')
    monkeypatch.setenv("ROOFTOP_KEYMAP", str(f))

    def check(app):
        assert app.screen.mode == "raw"  # `r` now toggles raw launches; `g` no longer does

    drive([small_trace(tmp_path)], ["3", "g", "r"], check=check)
