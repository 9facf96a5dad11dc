"""Issue 13, special paths: an unreadable input says "permission denied" (never "unrecognised
format") at every door and for every format; a directory is one run or an error, and two files
claiming one rank are an error naming both, on load as on import.

The test machine runs as root, for whom chmod 000 denies nothing. There the CLI runs in a child
that drops to the unprivileged uid 65534 ("nobody"), on files in a directory nobody may search but
not list; where nobody cannot even start the interpreter (it lives under a 0700 /root), the child
stays root but without the capabilities that bypass file permissions (CAP_DAC_OVERRIDE,
CAP_DAC_READ_SEARCH), so the kernel denies it a mode-000 file as it would any user. As any other
user a plain chmod 000 denies.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rooftop.trace import NotOneRun, load_trace, write_trace

from bad_inputs.corpus import _kernel_ev, _kineto_doc, _meta, _row
from bad_inputs.harness import ROOT, check, run_in_process

NOBODY = 65534
COMMANDS = ("report", "open", "import", "diff")


def _drop_to_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 24, 1, 2  # <linux/prctl.h>, <linux/capability.h>


def _drop_file_capabilities() -> None:
    """Out of the bounding set: after exec, root's effective capabilities no longer bypass
    permission bits (a mode-000 file is EACCES, and access() says so too)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


# Runs `rooftop_cli.main` once per argv (one interpreter for all of them) and prints the outcomes.
# `open` must fail before the terminal UI starts: if it got that far, it fails here instead.
_CHILD = ("import contextlib, io, json, sys\n"
          "import tui.app\n"
          "def started(*a, **k):\n"
          "    raise RuntimeError('the terminal UI started')\n"
          "tui.app.run_app = started\n"
          "from rooftop_cli import main\n"
          "out = []\n"
          "for argv in json.loads(sys.argv[1]):\n"
          "    err = io.StringIO()\n"
          "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
          "        rc = main(argv)\n"
          "    out.append([rc, err.getvalue()])\n"
          "print(json.dumps(out))\n")


class Denier:
    """Where unreadable inputs are made, and how the CLI is run so that they really are unreadable."""

    def __init__(self, base: Path, drop=None):
        self.base, self.drop = base, drop
        self.out = base / "out"  # where the child may write (-o, HOME)
        self.out.mkdir()
        self.out.chmod(0o777)

    def deny(self, path: Path) -> Path:
        path.chmod(0)
        return path

    def run(self, argvs: list[list[str]]) -> list[tuple[int, str]]:
        env = {**os.environ, "HOME": str(self.out), "XDG_CONFIG_HOME": str(self.out), "PYTHONDONTWRITEBYTECODE": "1"}
        p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(argvs)], capture_output=True, text=True,
                           cwd=ROOT, env=env, timeout=300, preexec_fn=self.drop,
                           stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr[-3000:]
        return [tuple(x) for x in json.loads(p.stdout)]

    def readable(self, path: Path) -> bool:
        """Whether the child could open `path` (proves the denial is real, whoever runs the tests)."""
        p = subprocess.run([sys.executable, "-c", f"open({str(path)!r}, 'rb').read(1)"], capture_output=True,
                           preexec_fn=self.drop, timeout=60)
        return p.returncode == 0


@pytest.fixture
def denier(tmp_path):
    if os.geteuid() != 0:
        yield Denier(tmp_path)
        return
    tried = []
    for drop in (_drop_to_nobody, _drop_file_capabilities):
        try:  # can the interpreter start this way? (nobody may not reach it; a container may forbid both)
            subprocess.run([sys.executable, "-c", "import rooftop"], preexec_fn=drop, cwd=ROOT, check=True,
                           capture_output=True, timeout=60)
            break
        except (subprocess.SubprocessError, OSError) as exc:
            tried.append(f"{drop.__name__}: {' '.join(str(exc).split())[:120]}")
    else:
        pytest.skip(f"running as root, and no way to make a file unreadable to a child: {'; '.join(tried)}")
    # pytest's tmp_path lies under a 0700 directory nobody cannot search: a directory of our own in
    # /tmp, searchable (so each denial is the file's own) but not listable
    base = Path(tempfile.mkdtemp(prefix="rooftop-denied-", dir="/tmp"))
    base.chmod(0o711)
    try:
        yield Denier(base, drop)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _nsys(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE StringIds (id INTEGER, value TEXT); INSERT INTO StringIds VALUES (1, 'k');"
                      "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER,"
                      " streamId INTEGER, correlationId INTEGER, demangledName INTEGER, shortName INTEGER);"
                      "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 7, 1, 1, 1);")
    con.commit()
    con.close()
    return path


KINETO = json.dumps(_kineto_doc([_kernel_ev(1, 10, 5)]))
NCU_CSV = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
           '"Metric Name","Metric Unit","Metric Value"\n'
           '"0","1","app","host","k","1","7","S","gpu__time_duration.sum","usecond","1.5"\n')


def _inputs(d: Path, fixtures: Path | None) -> dict[str, Path]:
    """One valid small file of every format rooftop reads."""
    d.mkdir()
    files = {"parquet": write_trace(d / "t.parquet", [_row(i) for i in range(3)], _meta())}
    (d / "t.json").write_text(KINETO)
    (d / "t.json.gz").write_bytes(gzip.compress(KINETO.encode()))
    files.update({"kineto": d / "t.json", "kineto-gz": d / "t.json.gz", "nsys": _nsys(d / "t.sqlite")})
    (d / "t.csv").write_text(NCU_CSV)
    files["ncu-csv"] = d / "t.csv"
    rep = fixtures / "ncu" / "AveryClapp__ESMM-Research__profile.ncu-rep" if fixtures else None
    if rep is not None and rep.is_file():
        shutil.copyfile(rep, d / "t.ncu-rep")
    else:  # its magic bytes suffice: the file is never read
        (d / "t.ncu-rep").write_bytes(b"NVR\x00" + b"\x00" * 64)
    files["ncu-rep"] = d / "t.ncu-rep"
    return files


def _argvs(path: Path, good: Path, out: Path) -> list[list[str]]:
    return [["report", str(path)], ["open", str(path)], ["import", str(path), "-o", str(out / "o.parquet")],
            ["diff", str(good), str(path)], ["diff", str(path), str(good)], [str(path)]]


def _assert_denied(outcomes, argvs, named: Path) -> None:
    for (rc, err), argv in zip(outcomes, argvs):
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, (argv, err)
        assert lines[0].startswith("rooftop: error: ") and "permission denied" in lines[0], (argv, err)
        assert str(named) in lines[0], (argv, err)
        assert "unrecognised" not in lines[0]


def test_unreadable_file_of_every_format_says_permission_denied(denier, request):
    try:
        fixtures = request.getfixturevalue("fixtures_dir")
    except pytest.skip.Exception:
        fixtures = None
    files = _inputs(denier.base / "in", fixtures)
    good = ROOT / "sample_traces" / "tiny-cpu.parquet"
    for fmt in ("parquet", "kineto", "kineto-gz", "nsys", "ncu-csv"):  # each is a good file before the denial
        assert run_in_process(["report", str(files[fmt])]).rc == 0, fmt
    argvs, named = [], []
    for fmt, path in files.items():
        denier.deny(path)
        assert not denier.readable(path), f"{path} is still readable: the test would prove nothing"
        argvs += _argvs(path, good, denier.out)
        named += [path] * len(COMMANDS + ("diff-2", "bare"))
    outcomes = denier.run(argvs)
    for (rc, err), argv, path in zip(outcomes, argvs, named):
        _assert_denied([(rc, err)], [argv], path)
    assert not list(denier.out.glob("*.parquet"))  # nothing was written


def test_unreadable_inside_directories_says_permission_denied(denier):
    """A rank file of a run, a Kineto rank, a directory that cannot be listed, a file in a directory
    that cannot be searched: each names what is unreadable (a rank is never silently left out)."""
    base = denier.base
    run = base / "run"
    for r in (0, 1):
        write_trace(run / f"rank={r}" / "trace.parquet", [_row(i) for i in range(3)], _meta())
    for d in (run, run / "rank=0", run / "rank=1"):
        d.chmod(0o755)
    bad_rank = denier.deny(run / "rank=1" / "trace.parquet")
    kin = base / "kin"
    kin.mkdir(mode=0o755)
    for r in (0, 1):
        (kin / f"job_rank{r}.json").write_text(KINETO)
        (kin / f"job_rank{r}.json").chmod(0o644)
    kin.chmod(0o755)
    bad_kineto = denier.deny(kin / "job_rank1.json")
    closed = base / "closed"
    closed.mkdir()
    write_trace(closed / "t.parquet", [_row(0)], _meta())
    denier.deny(closed)
    good = ROOT / "sample_traces" / "tiny-cpu.parquet"
    cases = [(run, bad_rank), (kin, bad_kineto), (closed, closed), (closed / "t.parquet", closed / "t.parquet")]
    argvs, named = [], []
    for path, culprit in cases:
        more = [["report", str(path)], ["open", str(path)], ["diff", str(good), str(path)]]
        if path != run:  # a rooftop run imports as itself; a Kineto run per rank
            more.append(["import", str(path), "-o", str(denier.out / f"o-{path.name}")])
        argvs += more
        named += [culprit] * len(more)
    outcomes = denier.run(argvs)
    for outcome, argv, culprit in zip(outcomes, argvs, named):
        _assert_denied([outcome], [argv], culprit)
    assert not [p for p in denier.out.iterdir() if p.name.startswith("o-")]


# --- a directory is one run, or an error --------------------------------------------------------------

def _parquet_dir(tmp_path: Path, files: dict[str, int | None]) -> Path:
    d = tmp_path / "run"
    for rel, rank in files.items():
        meta = _meta(**({"rank": rank} if rank is not None else {}))
        write_trace(d / rel, [_row(i) for i in range(3)], meta)
    return d


@pytest.mark.parametrize("files, rank, a, b", [
    ({"a.parquet": 0, "b.parquet": 0}, 0, "a.parquet", "b.parquet"),  # both say rank 0 in their metadata
    ({"rank1.parquet": None, "x_rank1.parquet": None}, 1, "rank1.parquet", "x_rank1.parquet"),  # by name
    ({"rank01.parquet": None, "rank1.parquet": None}, 1, "rank01.parquet", "rank1.parquet"),  # 01 is 1
    ({"rank0.parquet": 1, "b.parquet": 0}, 0, "b.parquet", "rank0.parquet"),  # the name wins over the metadata
    ({"rank=0/a.parquet": None, "rank_0/b.parquet": None}, 0, "rank=0/a.parquet", "rank_0/b.parquet"),  # folders
    ({"rank=0/a.parquet": None, "rank=0/b.parquet": None}, 0, "rank=0/a.parquet", "rank=0/b.parquet"),
])
def test_a_duplicate_rank_is_an_error_on_load(files, rank, a, b, tmp_path):
    d = _parquet_dir(tmp_path, files)
    want = f"rank {rank} appears twice ({a} and {b})"
    with pytest.raises(NotOneRun) as err:
        load_trace(d)
    assert want in str(err.value) and err.value.why == f"rank {rank} appears twice"
    for argv in (["report", str(d)], ["report", "--json", str(d)], ["import", str(d), "-o", str(tmp_path / "o.parquet")]):
        o = run_in_process(argv)
        check(o, d, "error")
        assert want in o.err, (argv, o.err)
    assert not (tmp_path / "o.parquet").exists()
    from tui.loader import open_analysis  # the TUI offers the files to choose from
    with pytest.raises(NotOneRun) as err:
        open_analysis(str(d))
    assert sorted(f.name for f in err.value.files) == sorted(Path(x).name for x in files)


@pytest.mark.parametrize("names, meta_ranks, want", [
    (("job_rank1.json", "job_rank01.json"), (None, None), "rank 1 appears twice (job_rank01.json and job_rank1.json)"),
    (("rank0.json", "rank1.json"), (1, None), "rank 1 appears twice (rank0.json and rank1.json)"),
])
def test_a_duplicate_kineto_rank_is_an_error_on_load_and_import(names, meta_ranks, want, tmp_path):
    d = tmp_path / "kin"
    d.mkdir()
    for name, r in zip(names, meta_ranks):
        head = {"distributedInfo": {"rank": r}} if r is not None else {}
        (d / name).write_text(json.dumps(_kineto_doc([_kernel_ev(1, 10, 5)], **head)))
    for argv in (["report", str(d)], ["import", str(d), "-o", str(tmp_path / "out")]):
        o = run_in_process(argv)
        check(o, d, "error")
        assert want in o.err, (argv, o.err)
    assert not (tmp_path / "out").exists()


def test_distinct_ranks_still_load_as_one_run(tmp_path):
    d = _parquet_dir(tmp_path, {"a.parquet": 0, "b.parquet": 1, })
    t = load_trace(d)
    assert t.ranks == [0, 1] and sorted(t.events["rank"].unique()) == [0, 1]
    assert [r["file"] for r in t.meta["ranks"]] == ["a.parquet", "b.parquet"]


def _kineto_dir(tmp_path, names, header_ranks):
    d = tmp_path / "kin"
    d.mkdir()
    for name, r in zip(names, header_ranks):
        head = {"distributedInfo": {"backend": "nccl", "rank": r, "world_size": 2}} if r is not None else {}
        (d / name).write_text(json.dumps(_kineto_doc([_kernel_ev(1, 10, 5)], **head)))
    return d


def test_kineto_ranks_named_only_in_their_headers_are_one_run_everywhere(tmp_path):
    """`report`, `import` and the TUI take the same directories: a rank in a file's distributedInfo
    counts as much as one in its name."""
    d = _kineto_dir(tmp_path, ("a.json", "b.json"), (1, 0))
    o = run_in_process(["report", "--json", str(d)])
    assert o.rc == 0, o.err
    assert json.loads(o.out)["trace"]["ranks"] == [0, 1]
    o = run_in_process(["import", str(d), "-o", str(tmp_path / "out")])
    assert o.rc == 0, o.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rank=0", "rank=1"]
    from tui.loader import open_analysis
    assert open_analysis(str(d)).trace.ranks == [0, 1]


def test_kineto_files_with_no_rank_anywhere_are_not_one_run(tmp_path):
    d = _kineto_dir(tmp_path, ("a.json", "b.json"), (0, None))
    for argv, want in ((["report", str(d)], "no distinct rank in each file's header or name"),
                       (["import", str(d), "-o", str(tmp_path / "out")], "b.json names no rank")):
        o = run_in_process(argv)
        check(o, d, "error")
        assert want in o.err, (argv, o.err)
    assert not (tmp_path / "out").exists()
    from tui.loader import open_analysis
    with pytest.raises(NotOneRun) as err:
        open_analysis(str(d))
    assert [f.name for f in err.value.files] == ["a.json", "b.json"]
