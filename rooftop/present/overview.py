"""What the Overview shows, in one shape: `OverviewData`, made from the report document.

The Overview's numbers come two ways: from a trace's stored summary (the report document kept in
its footer, rooftop/present/summary.py), read before pandas is imported, or from an `Analysis` of
the rows. Both are made into the same `OverviewData` from the same sections of the report
document: the stored summary's as it is, an Analysis' through `report_dict` asked for those
sections only (the functions that made the stored one). The screen renders the one shape and
never asks where it came from; a test builds it both ways from one trace and finds it equal.

What is not known yet is None: an Analysis still computing has its phase table before its
findings, gap and ranks (`complete`), and the file's own warnings before the analysis' own. What
the stored summary cannot give (the rows for a drill-down, a table to export) stays the Analysis'.

Importing this module, and building from a stored summary, import no pandas (the Overview paints
from it first); building from an Analysis imports the report, which the Analysis has loaded anyway.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

# The report document's sections the Overview reads: the phase table and what is printed with it
# (the sources line, the ceilings, the `--model` headline), then the rest below it.
HEAD_SECTIONS = ("trace", "device", "phases", "model", "model_phases")
REST_SECTIONS = ("findings", "gap")
# `Analysis` cached properties that make the rest (`warnings`: the analysis' own, not only the file's).
REST_TABLES = ("findings", "gap", "rank_phases", "rank_steps", "warnings")


@dataclass(frozen=True)
class OverviewPeaks:
    """The device peaks the numbers were computed with (the document's `device` section), under the
    names `rooftop.hardware.gpus.Peaks` gives them: what the sources line and the ceilings read."""

    source: str | None
    reason: str | None
    gpu: str | None  # the matched device's name
    flops: float | None
    bw: float | None
    datasheet_flops: float | None
    datasheet_bw: float | None
    measured_flops: float | None
    measured_bw: float | None

    @classmethod
    def of(cls, device: dict) -> "OverviewPeaks":
        datasheet, measured = device.get("datasheet") or {}, device.get("measured") or {}
        return cls(device.get("peaks_source"), device.get("peaks_reason"), device.get("matched"),
                   device.get("peak_flops"), device.get("peak_bw"), datasheet.get("flops"), datasheet.get("bw"),
                   measured.get("flops"), measured.get("bw"))

    @property
    def both_ceilings(self) -> bool:
        """A calibrated trace: both datasheet and measured ceilings known, so both percentages mean something."""
        return bool((self.measured_bw or self.measured_flops) and (self.datasheet_bw or self.datasheet_flops))


class OverviewFinding(NamedTuple):
    """A finding as the Overview lists it (the document's `findings` entries, their text)."""

    id: str
    severity: str
    title: str
    detail: str


@dataclass(frozen=True)
class OverviewData:
    """Everything the Overview shows below the identity, from the report document's sections.
    Tables are records (lists of dicts, as `report --json` prints them). None: not known yet."""

    phases: list[dict] | None = None  # the phase table; None: not computed yet
    peaks: OverviewPeaks | None = None
    counters: bool = False  # whether the rows carry hardware counters (the sources line says it)
    model_lines: list[str] = field(default_factory=list)  # the `--model` headline; empty without one
    findings: list[OverviewFinding] | None = None  # None: the rest below the phase table is not computed yet
    gap: list[dict] = field(default_factory=list)  # gap to ideal per phase; empty for a modeled trace
    comm: list[dict] = field(default_factory=list)  # exposed communication per rank and device
    ranks: list = field(default_factory=list)  # the trace's ranks (one file: none or one)
    rank_phases: list[dict] | None = None  # several ranks: each rank's phase table, else None
    rank_steps: list[dict] | None = None  # several ranks: per step, the spread between ranks
    # (where, message): the analysis' warnings once the rest is in, the file's own before; None: neither known
    warnings: list[tuple[str, str]] | None = None
    version: int | None = None  # the stored summary's analysis version; None: computed from the rows
    # The per-step table for the step curve, a DataFrame when at hand (an Analysis'); from a stored
    # summary, `load_steps` parses it (4 MB of JSON at 1M kernels: after the first paint).
    steps: Any = field(default=None, compare=False, repr=False)
    _stored_steps: Callable[[], list] | None = field(default=None, compare=False, repr=False)

    @property
    def complete(self) -> bool:
        """Whether everything the Overview shows is known (the step curve may still be parsing)."""
        return self.phases is not None and self.findings is not None

    @property
    def steps_to_load(self) -> bool:
        """Whether the step curve's table is to be parsed (`load_steps`) rather than at hand."""
        return self.steps is None and self._stored_steps is not None

    def load_steps(self) -> Any:
        """The per-step table for the step curve, as a DataFrame (blocking: call from a worker).
        ValueError when the stored list is damaged."""
        if self.steps is not None:
            return self.steps
        import pandas as pd

        return pd.DataFrame(self._stored_steps())

    @classmethod
    def of_document(cls, doc: dict, warnings: list | None, *, version: int | None = None, steps: Any = None,
                    stored_steps: Callable[[], list] | None = None) -> "OverviewData":
        """The Overview of a report document holding `HEAD_SECTIONS` (else nothing is known) and
        `REST_SECTIONS` (else only the phase table and what goes with it)."""
        if "phases" not in doc:
            return cls(warnings=_pairs(warnings), version=version)
        from rooftop.present.render import model_lines

        trace, model = doc.get("trace") or {}, doc.get("model")
        head = {"phases": list(doc["phases"]), "peaks": OverviewPeaks.of(doc["device"]),
                "counters": bool(trace.get("counters")), "ranks": list(trace.get("ranks") or []),
                # the headline of `--model` (a model named in the trace's metadata is not said again)
                "model_lines": model_lines(doc) if model is not None and model.get("source") != "trace metadata" else []}
        if "findings" not in doc:
            return cls(**head, warnings=_pairs(warnings), version=version)
        ranks = doc.get("ranks") or {}
        # exposed communication beside the findings that judge it (a modeled trace has none of those)
        comm = ((doc.get("comm") or {}).get("devices") or []) if not trace.get("modeled") else []
        return cls(**head, findings=[OverviewFinding(*(f[k] for k in OverviewFinding._fields)) for f in doc["findings"]],
                   gap=list(doc.get("gap") or []), comm=list(comm), rank_phases=ranks.get("phases"),
                   rank_steps=ranks.get("steps"), warnings=_pairs(warnings), version=version, steps=steps,
                   _stored_steps=stored_steps)

    @classmethod
    def of_stored(cls, stored: Any) -> "OverviewData":
        """The Overview of a current stored summary (`rooftop.present.summary.Stored`): every number,
        no pandas; the step curve's table parsed later (`load_steps`)."""
        return cls.of_document(stored.report, stored.warnings, version=stored.version,
                               stored_steps=lambda: stored.bulk_values("steps"))

    @classmethod
    def of_analysis(cls, a: Any) -> "OverviewData":
        """The Overview of an Analysis, as far as it is computed: records of its computed tables
        (and, under `--model`, the per-phase step means), nothing heavier; a big trace's workers
        call it, off the UI thread."""
        if not a.is_computed("phases"):
            return cls(warnings=_pairs(a.trace_warnings))
        from rooftop.present.report import COMM_DEVICE_KEYS, PHASE_KEYS, RANK_STEP_KEYS, records, report_dict

        rest = all(a.is_computed(name) for name in REST_TABLES)
        doc = report_dict(a, keys=HEAD_SECTIONS + (REST_SECTIONS if rest else ()))
        if not rest:
            return cls.of_document(doc, a.trace_warnings)
        # The sections' own records, the parts the Overview reads: the report's `comm` section lists
        # every step's and collective's too, and its `ranks` section is there only with steps.
        if not a.trace.modeled:  # (the findings computed it)
            doc["comm"] = {"devices": records(a.comm_devices, COMM_DEVICE_KEYS)}
        doc["ranks"] = {"phases": None if a.rank_phases is None else records(a.rank_phases, ("rank",) + PHASE_KEYS),
                        "steps": None if a.rank_steps is None else records(a.rank_steps, RANK_STEP_KEYS)}
        return cls.of_document(doc, a.warnings, steps=a.steps)


def _pairs(warnings: list | None) -> list[tuple[str, str]] | None:
    return None if warnings is None else [(str(w), str(m)) for w, m in warnings]
