"""The layer rule (DESIGN.md): the core imports neither Textual nor torch; viewing never imports torch."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("room,forbidden", [
    ("rooftop", {"torch", "textual", "tui", "collectors", "textual_plotext", "textual_fastdatatable", "plotext"}),
    ("tui", {"torch"}),
    ("collectors", {"textual", "tui", "textual_plotext", "textual_fastdatatable"}),
])
def test_static_layer_rule(room, forbidden):
    bad = {}
    for f in (ROOT / room).rglob("*.py"):
        if f.name == "cli.py" and room == "rooftop":
            continue  # the front door imports the edges lazily, inside the command that needs them
        hit = imports_of(f) & forbidden
        if hit:
            bad[str(f.relative_to(ROOT))] = sorted(hit)
    assert not bad, f"layer rule broken: {bad}"


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_report_imports_neither_torch_nor_textual(tmp_path):
    from rooftop.trace import write_trace
    p = write_trace(tmp_path / "t.parquet", [dict(kind="kernel", name="k", start_ns=0, dur_ns=5, path="decode/step=0")], {})
    mods = _modules_after(f"from rooftop.cli import main; main(['report', {str(p)!r}]); main(['report', '--json', {str(p)!r}])")
    assert "torch" not in mods
    assert "textual" not in mods


def test_rooftop_package_alone_is_light():
    mods = _modules_after("import rooftop.analysis, rooftop.report, rooftop.trace, rooftop.devices")
    assert not {"torch", "textual", "collectors", "tui"} & mods
