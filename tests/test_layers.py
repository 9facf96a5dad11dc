"""The layer rules (docs/architecture.md): the core (rooftop/) imports no edge, no UI and no torch;
the edges (collectors/, tui/) stand on it; the command (rooftop_cli/) stands on all of them and
nothing imports it; viewing never imports torch; one module opens traces."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

UI = ("textual", "textual_plotext", "textual_fastdatatable", "plotext")
EDGES = ("tui", "collectors")
COMMAND = "rooftop_cli"

# The layer contracts, each by name (as import-linter states them). A wing is a folder or a file (or
# several); `forbidden` are module prefixes its files may not import. `module_level_only` marks the
# command (rooftop_cli/), which may reach the edges only inside the command that needs them.
CONTRACTS = {
    "the core is headless: rooftop/ imports no edge, no UI, no torch and not the command": dict(
        wing="rooftop", forbidden=("torch", *UI, *EDGES, COMMAND), exclude=("rooftop/__main__.py",)),
    "`python -m rooftop` is the one way up: rooftop/__main__.py imports the command and no edge": dict(
        wing="rooftop/__main__.py", forbidden=("torch", *UI, *EDGES)),
    "the command is the top floor: nothing in collectors/ or tui/ imports rooftop_cli": dict(
        wing=("collectors", "tui"), forbidden=(COMMAND,)),
    "the command reaches the edges lazily: rooftop_cli/ imports none at module level": dict(
        wing="rooftop_cli", forbidden=("torch", *UI, *EDGES), module_level_only=True),
    "readers of existing files import no torch and no collection code": dict(
        wing="collectors/readers", forbidden=("torch", "nvtx", "collectors.capture", "collectors.predict",
                                              "collectors.open", *UI, "tui")),
    "opening a trace imports no torch and no collection code": dict(
        wing="collectors/open.py", forbidden=("torch", "nvtx", "collectors.capture", "collectors.predict", *UI, "tui")),
    "collection never imports the TUI": dict(
        wing="collectors", forbidden=(*UI, "tui")),
    "the TUI never imports torch, and opens files through collectors.open only": dict(
        wing="tui", forbidden=("torch", "nvtx", "collectors.capture", "collectors.predict", "collectors.readers")),
}


def imports_of(path: Path, module_level_only: bool = False) -> set[str]:
    """Absolute module names a file imports (`from a.b import c` gives `a.b` and `a.b.c`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if module_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def _breaks(name: str, forbidden) -> bool:
    return any(name == f or name.startswith(f + ".") for f in forbidden)


def _files(root: Path, wing: str | tuple[str, ...]) -> list[Path]:
    if isinstance(wing, tuple):
        return [f for w in wing for f in _files(root, w)]
    base = root / wing
    return [base] if base.suffix == ".py" else sorted(base.rglob("*.py"))


def violations(root: Path, wing: str | tuple[str, ...], forbidden, module_level_only: bool = False,
               exclude: tuple[str, ...] = ()) -> dict[str, list[str]]:
    files = _files(root, wing)
    files = [f for f in files if str(f.relative_to(root)) not in exclude]
    bad = {}
    for f in files:
        hit = sorted(n for n in imports_of(f, module_level_only) if _breaks(n, forbidden))
        if hit:
            bad[str(f.relative_to(root))] = hit
    return bad


@pytest.mark.parametrize("contract", list(CONTRACTS))
def test_layer_contract(contract):
    bad = violations(ROOT, **CONTRACTS[contract])
    assert not bad, f"broken contract '{contract}': {bad}"


@pytest.mark.parametrize("contract,wrong", [
    ("the core is headless: rooftop/ imports no edge, no UI, no torch and not the command",
     "from collectors.readers import kineto"),
    ("the core is headless: rooftop/ imports no edge, no UI, no torch and not the command", "import tui.app"),
    ("the core is headless: rooftop/ imports no edge, no UI, no torch and not the command",
     "from rooftop_cli import main"),
    ("`python -m rooftop` is the one way up: rooftop/__main__.py imports the command and no edge",
     "from collectors.open import open_trace"),
    ("the command is the top floor: nothing in collectors/ or tui/ imports rooftop_cli",
     "from rooftop_cli.commands import UsageError"),
    ("the command reaches the edges lazily: rooftop_cli/ imports none at module level", "import tui.app"),
    ("the command reaches the edges lazily: rooftop_cli/ imports none at module level", "from collectors import open"),
    ("readers of existing files import no torch and no collection code", "from collectors.capture.record import Recorder"),
    ("readers of existing files import no torch and no collection code", "import torch"),
    ("opening a trace imports no torch and no collection code", "import torch"),
    ("collection never imports the TUI", "from textual.app import App"),
    ("the TUI never imports torch, and opens files through collectors.open only", "from collectors.capture import collect"),
    ("the TUI never imports torch, and opens files through collectors.open only",
     "from collectors.readers.importers import detect"),
])
def test_each_contract_catches_a_wrong_import(tmp_path, contract, wrong):
    """A deliberately wrong import in each wing breaks its contract (the check is not vacuous)."""
    spec = CONTRACTS[contract]
    wing = spec["wing"]
    target = tmp_path / (wing[-1] if isinstance(wing, tuple) else wing)
    if target.suffix == ".py":
        target.parent.mkdir(parents=True)
    else:
        target.mkdir(parents=True)
        target = target / "wrong.py"
    target.write_text(f"{wrong}\n")
    assert violations(tmp_path, **spec)


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_report_imports_neither_torch_nor_textual(tmp_path):
    from rooftop.trace import write_trace
    p = write_trace(tmp_path / "t.parquet", [dict(kind="kernel", name="k", start_ns=0, dur_ns=5, path="decode/step=0")], {})
    mods = _modules_after(f"from rooftop_cli import main; main(['report', {str(p)!r}]); main(['report', '--json', {str(p)!r}])")
    assert "torch" not in mods
    assert "textual" not in mods


def test_rooftop_package_alone_is_light():
    mods = _modules_after("import rooftop.analysis, rooftop.present.report, rooftop.trace, rooftop.hardware.gpus")
    assert not {"torch", "textual", "collectors", "tui", "rooftop_cli"} & mods


def test_python_m_rooftop_imports_only_the_command():
    """The one module of rooftop/ that reaches above the core: `python -m rooftop` runs the command."""
    assert imports_of(ROOT / "rooftop" / "__main__.py") == {"rooftop_cli.commands", "rooftop_cli.commands.main", "sys"}
    assert CONTRACTS["the core is headless: rooftop/ imports no edge, no UI, no torch and not the command"][
        "exclude"] == ("rooftop/__main__.py",)


# Format sniffing: the readers' `detect` and `check_format` (collectors/readers/importers.py). The
# readers use them inside (`rooftop import`'s own command, a directory's files); everything else
# that opens a trace goes through collectors/open.py, which sniffs once per open.
SNIFF = {"detect", "check_format"}


def _sniff_calls(path: Path) -> list[int]:
    """Lines of `path` that call or import a sniff function."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in SNIFF:
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("importers"):
            if SNIFF & {a.name for a in node.names}:
                lines.append(node.lineno)
    return lines


def sniffers(root: Path) -> dict[str, list[int]]:
    files = [f for w in ("rooftop", "rooftop_cli", "tui", "collectors") for f in sorted((root / w).rglob("*.py"))]
    out = {}
    for f in files:
        rel = f.relative_to(root).as_posix()
        if rel.startswith("collectors/readers/"):
            continue
        if lines := _sniff_calls(f):
            out[rel] = lines
    return out


def test_the_format_is_sniffed_in_one_module():
    assert set(sniffers(ROOT)) == {"collectors/open.py"}


def test_the_sniff_check_catches_a_second_sniffer(tmp_path):
    (tmp_path / "collectors").mkdir()
    (tmp_path / "collectors" / "open.py").write_text("from .readers.importers import detect\n")
    (tmp_path / "tui").mkdir()
    (tmp_path / "tui" / "loader.py").write_text("def f(p, importers):\n    return importers.detect(p)\n")
    assert set(sniffers(tmp_path)) == {"collectors/open.py", "tui/loader.py"}
