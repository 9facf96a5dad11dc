"""No import cycles anywhere in the house (rooftop/, collectors/, tui/).

A cycle is two modules that each need the other: neither can be understood, tested or moved
alone, and which one loads first decides what works. The graph is read from the source with
`ast`, not by importing: every `import` and `from ... import` of a project module counts, at the
top of a module or inside a function (a deferred import is still a dependency: it only moves the
failure to run time); imports under `if TYPE_CHECKING:` do not (they never run). A package's
`__init__` that its submodules run on their way in is no edge (Python loads it first, whatever
the order): only what a module names.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rooftop", "collectors", "tui")


def _modules() -> dict[str, Path]:
    """Every module of the project's packages: dotted name -> file (a package by its `__init__`)."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """The import statements that run (anywhere but under `if TYPE_CHECKING:`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.If) and _is_type_checking(node):
            children = node.orelse
        stack.extend(children)


def _resolve(name: str, known: dict) -> str | None:
    """The longest known module that `name` is or lies in (a name imported from a module is that
    module)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, known: dict) -> set[str]:
    """The project modules `module` names in its imports."""
    is_pkg = path.name == "__init__.py"
    here = module if is_pkg else module.rpartition(".")[0]
    out = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import sub` names the submodule when there is one, else pkg itself
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for t in targets:
            hit = _resolve(t, known)
            if hit is not None and hit != module:
                out.add(hit)
    return out


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: imports_of(m, p, known) for m, p in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_the_project_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 100 and "collectors.readers.importers" in graph
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("edges, want", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
])
def test_the_cycle_finder_finds_what_is_there(edges, want):
    assert sorted(cycles(edges)) == want


def test_the_graph_sees_deferred_relative_imports_and_skips_type_checking(tmp_path):
    """The edges a cycle hides behind: an import inside a function, a relative `from . import`,
    a name imported from a module; and none for an import only type checkers run."""
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import thing\n")
    (pkg / "b.py").write_text("from . import c\nfrom typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from .a import f\n")
    (pkg / "c.py").write_text("import p.a\n")
    known = {"p": pkg / "__init__.py", "p.a": pkg / "a.py", "p.b": pkg / "b.py", "p.c": pkg / "c.py"}
    graph = {m: imports_of(m, f, known) for m, f in known.items()}
    assert graph == {"p": set(), "p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
