"""`rooftop report`: the phase table, top kernel groups and findings, as one JSON document
(`report_dict`), and as text rendered from that document (rooftop/present/render.py)."""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from rooftop.present import columns
from rooftop.analysis import Analysis, compare
from rooftop.analysis.gap import STEP_GAP_KEYS
from rooftop.analysis.per_device import DEVICE_KEYS
from rooftop.present.format import fmt_bytes, fmt_ns, fmt_num, fmt_pct
from rooftop.present.render import _printable, _table, model_lines as render_model_lines, render_report

# The published columns and their order come from the registry (rooftop/present/columns.py), the
# one place a table's columns are declared; `report --json` keys follow it.
PHASE_KEYS = columns.PHASES.keys
STEP_KEYS = columns.STEPS.keys
GAP_KEYS = columns.GAP.keys
# coverage: the share of the group's kernel time whose FLOPs/bytes (both, for ai) are known; the
# rates are over those launches only
GROUP_KEYS = columns.GROUPS.keys
RANK_STEP_KEYS = columns.RANK_STEPS.keys


def _clean(v: Any) -> Any:
    """JSON-safe scalar: NaN/NA -> None, numpy -> python."""
    if v is None or v is pd.NA:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


def _clean_doc(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _clean_doc(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [_clean_doc(v) for v in doc]
    return _clean(doc)


def records(df: pd.DataFrame | None, keys) -> list[dict]:
    if df is None or df.empty:
        return []
    keys = [k for k in keys if k in df.columns]
    if df.columns.has_duplicates:
        return [{k: _clean(v) for k, v in zip(keys, row)} for row in df[keys].itertuples(index=False, name=None)]
    # column by column (the per-step lists are ~7k rows of ~25 values at 1M kernels): what `_clean`
    # makes of each value, with NumPy's own conversion for plain number columns
    columns = [_clean_column(df[k]) for k in keys]
    return [dict(zip(keys, row)) for row in zip(*columns)]


def _clean_column(col: pd.Series) -> list:
    """`[_clean(v) for v in col]`: plain Python values, None for NaN, ±inf and missing."""
    if isinstance(col.dtype, np.dtype):
        if col.dtype.kind == "f":
            values = col.to_numpy()
            out = values.tolist()
            for i in np.flatnonzero(~np.isfinite(values)).tolist():
                out[i] = None
            return out
        if col.dtype.kind in "iub":
            return col.to_numpy().tolist()
    if isinstance(col.dtype, pd.CategoricalDtype):  # each category cleaned once
        cleaned = [_clean(v) for v in col.cat.categories.to_numpy(dtype=object)] + [None]
        return [cleaned[c] for c in col.cat.codes.to_numpy().tolist()]  # (code -1: the trailing None)
    if isinstance(col.dtype, pd.StringDtype):  # text stays text; missing is None
        return col.to_numpy(dtype=object, na_value=None).tolist()
    values = col.to_numpy(dtype=object).tolist()
    if all(v is None or type(v) is str for v in values):  # (what `_clean` leaves as it is)
        return values
    return [_clean(v) for v in values]


def totals(timed: pd.DataFrame, span: int) -> dict:
    """Counts and summed durations per kind: `kernels` counts kernel launches only, never copies;
    memcpy and memset have their own keys (and `ops` on a CPU-only run, whose timed rows are ops)."""
    kinds = timed["kind"] if len(timed) else pd.Series(dtype=object)
    # grouped on a categorical's codes (no million strings); the kinds it holds only
    agg = timed["dur_ns"].groupby(kinds, sort=False, observed=True).agg(["size", "sum"]) if len(timed) else None

    def part(kind: str) -> tuple[int, int]:
        if agg is None or kind not in agg.index:
            return 0, 0
        return int(agg.loc[kind, "size"]), int(agg.loc[kind, "sum"])

    out = {}
    for kind, count_key, time_key in (("kernel", "kernels", "kernel_time_ns"), ("memcpy", "memcpy", "memcpy_time_ns"),
                                      ("memset", "memset", "memset_time_ns")):
        out[count_key], out[time_key] = part(kind)
    if agg is not None and "op" in agg.index:
        out["ops"], out["op_time_ns"] = part("op")
    out["span_ns"] = span
    out["timed_kind"] = str(kinds.iloc[0]) if len(timed) else None
    return out


def top_kernels(a: Analysis, top: int) -> list[dict]:
    """The longest kernel groups, keyed by the WHOLE kernel name (a machine output never carries a
    cut name); `short_name` is the display name tables show."""
    g = a.groups("name").head(top)
    rows = records(g, GROUP_KEYS)
    timed = a.timed
    if rows and "short_name" in timed.columns:
        # the display name of the first launch of each whole name (looked up for the top ones only:
        # pairing a million names with their short names cost more than the rest of the table)
        names, short = timed["name"], timed["short_name"]
        if isinstance(names.dtype, pd.CategoricalDtype):  # compared on the codes (no text per row)
            codes = names.cat.codes.to_numpy()
            wanted = names.cat.categories.get_indexer([r["key"] for r in rows])
            hits = [codes == c if c >= 0 else np.zeros(len(codes), dtype=bool) for c in wanted.tolist()]
        else:
            hits = [(names == r["key"]).to_numpy(dtype=bool, na_value=False) for r in rows]
        for r, hit in zip(rows, hits):
            first = int(hit.argmax())
            r["short_name"] = _clean(short.iloc[first]) if hit[first] else None
    return rows


def model_phases(a: Analysis) -> list[dict] | None:
    """Per phase, over its steps whose model bytes are known (the lowest rank's, as the phase table):
    the mean ideal and measured step time and the tokens/s, which the model-level headline quotes.
    None without a model."""
    if a.model is None:
        return None
    st = a.steps
    if st.empty or "model_bytes" not in st.columns:
        return []
    from rooftop.analysis.per_device import headline

    st = headline(st)  # the lowest rank's and device's, as the phase table
    out = []
    for phase in a.phases["phase"] if len(a.phases) else []:
        known = st[(st["phase"] == phase) & st["model_bytes"].notna()]
        span = known["span_ns"].sum()
        out.append({"phase": _clean(phase), "steps": len(known), "ideal_ns": _clean(known["model_ideal_ns"].mean()),
                    "span_ns": _clean(known["span_ns"].mean()),
                    "tokens_per_s": _clean(known["new_tokens"].sum() / (span / 1e9)) if span > 0 else None})
    return out


def top_groups(a: Analysis, top: int) -> list[dict]:
    """The longest kernel groups by display name (`short_name`), as the text report and the screens
    list them; `top_kernels` keys them by the whole name instead."""
    return records(a.groups("short_name").head(top), GROUP_KEYS)


# What the text report reads of the document (rooftop/present/render.py): the rest is computed for JSON only.
TEXT_KEYS = ("trace", "device", "identity", "model", "model_phases", "phases", "top_groups", "gap", "ranks",
             "findings", "warnings", "devices", "devices_note", "idle_phases", "comm")


def report_dict(a: Analysis, top: int = 10, keys: tuple[str, ...] | None = None, skip: tuple[str, ...] = (),
                ahead: bool = True) -> dict:
    """The report document (`rooftop report --json`); `keys`: only these sections, in the same order
    (the text report asks for `TEXT_KEYS`, and skips the per-step lists and by-name groups); `skip`:
    all sections but these. `ahead`: the wait tables built on a second thread meanwhile (`tables_ahead`)."""
    def wanted(k: str) -> bool:
        return (keys is None or k in keys) and k not in skip

    with tables_ahead(a, WAIT_TABLES if ahead and (keys is None or set(keys) & set(WAIT_SECTIONS)) else ()):
        sections = _sections(a, top, keys, wait_last=True)
        # the other sections first: meanwhile the second thread builds the wait tables, which
        # deciding whether the wait sections exist would otherwise wait for at once
        built = {k: f() for k, f in sections.items() if k != _WAIT and wanted(k)}
        doc = {}
        for k, f in sections.items():
            if k != _WAIT:
                if k in built:
                    doc[k] = built[k]
                continue
            for wk, wf in f().items():  # (in their place in the document)
                if wanted(wk):
                    doc[wk] = wf()
        return doc


_WAIT = "\0wait"  # where `_sections(..., wait_last=True)` leaves the wait sections to be decided


# The tables behind the wait sections (`wait_sections`): what the GPU waited for is found apart from
# the steps, phases and findings the rest of the document reads, so the two can be built at once.
WAIT_TABLES = ("idle", "overlap", "copies", "layers")
# Below this many timed rows a second thread costs more than it saves.
TWO_THREADS_MIN_ROWS = 200_000


def two_threads(a: Analysis) -> bool:
    """Whether `a`'s report is built on two threads (the wait tables ahead here, the summary's
    sections in rooftop/present/summary.py): from `TWO_THREADS_MIN_ROWS` timed rows, under pandas 3
    (whose copy-on-write never changes a shared frame in place), unless `ROOFTOP_THREADS=0`."""
    from rooftop import speedups

    return int(pd.__version__.split(".")[0]) >= 3 and len(a.timed) >= TWO_THREADS_MIN_ROWS \
        and speedups.on("THREADS")


@contextmanager
def tables_ahead(a: Analysis, names: tuple[str, ...]):
    """Build the `Analysis` tables `names` on a second thread while the caller builds the others: the
    tables are NumPy sorts, gathers and group-bys over the timed rows, which release the GIL, so the
    two keep both cores busy. An error there is dropped: the caller's own read of that table raises
    it, as it would without the thread (a cached table is computed once, by whichever thread asks
    first; the other waits for it). Only where `two_threads` says so."""
    if not names or not two_threads(a):
        yield
        return

    def build() -> None:
        for name in names:
            try:
                getattr(a, name)
            except Exception:  # noqa: BLE001  (raised again where the caller reads it)
                return

    worker = threading.Thread(target=build, name="rooftop-ahead", daemon=True)
    worker.start()
    try:
        yield
    finally:
        worker.join()


def section_names(a: Analysis) -> list[str]:
    """The sections of `a`'s report document, in its order (computed: only what decides which there
    are, the timed rows and the steps, which every section needs anyway)."""
    return list(_sections(a, 10))


def _sections(a: Analysis, top: int, keys: tuple[str, ...] | None = None, wait_last: bool = False) -> dict:
    """Each section of the report document, as a function that computes it, in the document's order.
    `keys`: the sections asked for (None: all); whether a section that is not asked for exists is
    not decided, since deciding computes its table (the Overview asks for a few, before the rest).
    `wait_last`: the wait sections as one entry `_WAIT` in their place, whose function decides and
    gives them (`wait_sections`), for a caller that builds them after the rest."""

    def asked(*names: str) -> bool:
        return keys is None or any(n in keys for n in names)

    t = a.trace
    p = a.peaks
    timed = a.timed

    def span() -> int:
        return int(timed["start_ns"].add(timed["dur_ns"]).max() - timed["start_ns"].min()) if len(timed) else 0

    sections = {
        "trace": lambda: {"path": t.path, "source": t.source.get("tool"), "source_detail": t.source or None,
                          "modeled": t.modeled, "incomplete": bool(t.meta.get("incomplete")), "counters": a.has_counters,
                          "model": t.meta.get("model"), "workload": t.meta.get("workload"), "ranks": t.ranks or None,
                          "steps_found": steps_found(t.meta)},
        "device": lambda: {
            "name": t.device_meta.get("name"), "matched": p.gpu.name if p.gpu is not None else None,
            "peak_flops": p.flops, "peak_bw": p.bw, "peaks_source": p.source, "peaks_reason": p.reason,
            "datasheet": {"flops": p.datasheet_flops, "bw": p.datasheet_bw},
            "measured": {"flops": p.measured_flops, "bw": p.measured_bw},
            "ridge": a.ridge, "dtype": p.dtype,
            # new keys: how the device was identified, every dtype's peak, ncu's own peaks
            "key": p.gpu.key if p.gpu is not None else None, "cc": t.device_meta.get("cc"),
            "matched_by": list(p.matched_by), "inferred": p.inferred, "override": p.override,
            "confirmed": p.gpu.confirmed if p.gpu is not None else None,
            "peak_flops_by_dtype": {k: v for k, v in p.table.items() if k != "int8"} or None,
            "ncu": ({"flops": p.ncu_flops, "bw": p.ncu_bw, "flops_by_dtype": dict(p.ncu_table)}
                    if p.ncu_bw or any(p.ncu_table.values()) else None),
            "peaks_differ": p.differences, "peaks_notes": list(p.notes)},
        "totals": lambda: totals(timed, span()),
        "phases": lambda: records(a.phases, PHASE_KEYS),
        "steps": lambda: records(a.steps, STEP_KEYS),
        "top_kernels": lambda: top_kernels(a, top),
        "categories": lambda: records(a.groups("category"), GROUP_KEYS),
        "attention": lambda: [{k: _clean(v) for k, v in vars(v).items()} for v in a.attention],
        "gap": lambda: records(a.gap, GAP_KEYS),
        "gap_steps": lambda: records(a.gap_steps, STEP_GAP_KEYS),
        "model": lambda: _clean_doc(a.model_summary),
        "findings": lambda: [f.to_dict() for f in a.findings],
        "warnings": lambda: list(t.warnings) + ([t.cut_note] if t.cut_note else []),
        # new keys: the identity lines as the report shows them, the top groups by display name, and
        # the per-phase step means of the model-level headline
        "identity": lambda: {k: _clean(a.identity.get(k)) for k in ("label", "model", "workload", "device", "source")},
        "top_groups": lambda: top_groups(a, top),
        "model_phases": lambda: model_phases(a),
    }
    if asked("devices", "devices_note") and a.devices is not None:  # one rank driving several GPUs: each device's own figures (per_device.py)
        sections["devices"] = lambda: records(a.devices, DEVICE_KEYS)
        sections["devices_note"] = lambda: a.devices_note
    if asked(*WAIT_SECTIONS):
        if wait_last:
            sections[_WAIT] = lambda: wait_sections(a, top)
        else:
            sections.update(wait_sections(a, top))
    if asked("ranks") and a.rank_steps is not None:
        sections["ranks"] = lambda: {
            "phases": records(a.rank_phases, ("rank",) + PHASE_KEYS),
            "steps": records(a.rank_steps, RANK_STEP_KEYS)}
    if asked("stalls") and a.has_counters:
        def stall_shares():
            sh = a.stalls("phase")
            return {str(ph): {k: _clean(v) for k, v in row.items()} for ph, row in sh.iterrows()} if sh is not None else None
        sections["stalls"] = stall_shares
    return sections


def steps_found(meta: dict) -> dict | None:
    """How the importer found the steps (rooftop.trace.steps `RULES`) and how many took their phase from
    their own work (`phase_source: inferred`); None where the metadata has no step."""
    steps = [s for s in meta.get("steps") or [] if isinstance(s, dict)]
    if not steps:
        return None
    return {"count": len(steps), "rule": meta.get("step_rule"),
            "inferred_phases": sum(s.get("phase_source") == "inferred" for s in steps),
            "no_phase": sum(s.get("phase") is None for s in steps)}


IDLE_KEYS = ("rank", "device", "phase", "step", "span_ns", "idle_ns", "launch_gaps_ns") + tuple(
    f"{c}_{x}" for x in ("ns", "frac") for c in ("comm", "copies", "edge", "launch", "sync", "host", "other"))
COMM_KEYS = ("rank", "device", "phase", "step", "comm_ns", "compute_ns", "overlapped_ns", "exposed_ns",
             "exposed_frac", "span_ns", "exposed_share")
# The `comm` section's per-device table (`Analysis.comm_devices`), which the Overview also shows.
COMM_DEVICE_KEYS = ("rank", "device", "steps") + COMM_KEYS[4:]
# The sections `wait_sections` may give.
WAIT_SECTIONS = ("idle", "idle_phases", "idle_gaps", "comm", "layers", "copies")
GAP_LIST_KEYS = ("rank", "device", "phase", "step", "start_ns", "dur_ns", "main", "cause", "what",
                 "comm_ns", "copies_ns", "idle_ns")


def wait_sections(a: Analysis, top: int) -> dict:
    """What the GPU waited for (new keys): idle by cause per step and phase with the largest gaps,
    exposed communication per step and device with the top exposed collectives, host copies
    against their link. Absent where the trace has no GPU rows (or no communication / copies)."""
    out = {}
    if a.idle is not None:
        out["idle"] = lambda: records(a.idle, IDLE_KEYS)
        out["idle_phases"] = lambda: records(a.idle_phases, ("phase", "device", "steps") + IDLE_KEYS[4:])
        out["idle_gaps"] = lambda: records(a.idle_causes.listed().head(top), GAP_LIST_KEYS)
    if a.overlap is not None:
        from rooftop.analysis import comm as comm_
        out["comm"] = lambda: {
            "steps": records(a.overlap.table(), COMM_KEYS),
            "devices": records(a.comm_devices, COMM_DEVICE_KEYS),
            "top_exposed": records(comm_.top_exposed(a.overlap.collectives(), top),
                                   ("rank", "device", "phase", "step", "name", "calls", "dur_ns", "exposed_ns", "bytes")),
            "stragglers": records(a.rank_steps, ("phase", "step", "straggler", "spread")) if a.rank_steps is not None else None}
    if a.layers is not None:
        out["layers"] = lambda: records(a.layers, ("phase", "layer", "layer_source", "kernels", "time_ns", "steps"))
    if a.copies is not None:
        from rooftop.analysis.copies import COPY_COLUMNS
        out["copies"] = lambda: records(a.copies, COPY_COLUMNS)
    return out


def report_text(a: Analysis, top: int = 10) -> str:
    """The report as text: the report document (what the text shows of it), rendered by the same
    renderer that serves a stored summary."""
    return render_report(report_dict(a, top, TEXT_KEYS))


def model_lines(a: Analysis) -> list[str]:
    """The model-level headline of an analysis (the Overview shows it under `--model`)."""
    return render_model_lines({"model": _clean_doc(a.model_summary), "phases": records(a.phases, PHASE_KEYS),
                               "model_phases": model_phases(a),
                               "device": {"peak_bw": a.peaks.bw, "peaks_reason": a.peaks.reason}})


def diff_text(a: Analysis, b: Analysis, top: int = 10) -> str:
    d = compare(a, b)
    lines = [f"rooftop diff: A = {_printable(d.label_a)}{' [MODELED]' if a.trace.modeled else ''}"
             f"  B = {_printable(d.label_b)}{' [MODELED]' if b.trace.modeled else ''}", ""]
    rows = []
    for r in d.phases.to_dict(orient="records"):
        metrics = [("span_ns", fmt_ns), ("tokens_per_s", fmt_num), ("tbps", fmt_num), ("mbu", fmt_pct), ("mfu", fmt_pct)]
        if a.model is not None or b.model is not None:
            metrics.append(("model_mbu", fmt_pct))
        for m, f in metrics:
            ratio = r.get(f"{m}_ratio")
            rows.append([_printable(r["phase"]), m, f(r.get(f"{m}_a")), f(r.get(f"{m}_b")),
                         "—" if ratio is None or ratio != ratio else f"{ratio:.2f}x"])
    lines.append(_table(["phase", "metric", "A", "B", "B/A"], rows, right={2, 3, 4}))
    lines.append("")
    rows = [[_printable(r["key"]), fmt_ns(r["time_ns_a"]), fmt_ns(r["time_ns_b"]),
             ("+" if r["time_delta"] > 0 else "") + fmt_ns(r["time_delta"]), fmt_bytes(r["bytes_delta"]), _printable(r["status"])]
            for r in d.groups.head(top).to_dict(orient="records")]
    lines.append("kernel groups with the largest time change")
    lines.append(_table(["kernel", "A", "B", "Δ time", "Δ bytes", ""], rows, right={1, 2, 3, 4}))
    lines.append("")
    lines.append("findings")
    for f in d.findings_added:
        lines.append(f"  + {_printable(f.title)}")
    for f in d.findings_removed:
        lines.append(f"  - {_printable(f.title)}")
    for x, y in d.findings_changed:
        lines.append(f"  ~ {_printable(x.title)}  ->  {_printable(y.title)}")
    if not (d.findings_added or d.findings_removed or d.findings_changed):
        lines.append("  (no change)")
    return "\n".join(lines)
