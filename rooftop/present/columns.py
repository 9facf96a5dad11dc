"""The columns of every analysis table, declared once: key, label, unit, how a value is shown, meaning.

`rooftop report --json` takes its keys (and their order) from here, the TUI takes its column
headers from here, and `docs/definitions.md` lists this registry (a test keeps the two equal).
A table's column is declared once, in its table; the same key may read differently in two tables
(a phase's `span_ns` is its "time", a step's is its "span") because it means a slightly different
thing there. A column the analysis computes but does not publish (intermediate sums) is not here.

Units say what the stored value is: `ns`, `fraction` (0..1), `FLOP`, `B`, `TFLOP/s`, `TB/s`,
`FLOP/s`, `FLOP/B`, `tokens/s`, `count`, or empty for text. Unknown is null, never 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rooftop.present.format import fmt_tera, fmt_value

KINDS = ("text", "int", "num", "ns", "pct", "bytes", "flops", "rate")


@dataclass(frozen=True)
class Column:
    """One published column of an analysis table."""

    key: str        # the DataFrame column and the JSON key
    label: str      # the short header tables show (`tok/s`, `MBU`)
    unit: str       # the unit of the stored value (see the module docstring)
    kind: str       # how a value is shown: one of KINDS
    meaning: str    # one sentence, for docs/definitions.md and help
    digits: int = 1  # decimals a numeric grid shows
    title: str = ""  # the label in words where there is room (a list of metrics); the label if empty

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.key}: unknown kind {self.kind!r}")

    @property
    def words(self) -> str:
        return self.title or self.label

    @property
    def header(self) -> str:
        """The header of a grid of bare numbers: the display unit appended (`span µs`, `MFU %`)."""
        if self.kind == "ns":
            return f"{self.label} µs"
        if self.kind == "pct" and "%" not in self.label:
            return f"{self.label} %"
        return self.label

    def format(self, value) -> str:
        """`value` as text with its unit (`12.3 µs`, `45.6%`); unknown is an em dash."""
        if self.kind == "num" and self.unit in ("TFLOP/s", "TB/s"):
            return fmt_tera(value, self.unit)
        return fmt_value(value, self.kind, self.unit)


@dataclass(frozen=True)
class Table:
    """The published columns of one analysis table, in `report --json` order."""

    name: str
    meaning: str
    columns: tuple[Column, ...]
    _by_key: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key = {c.key: c for c in self.columns}
        if len(by_key) != len(self.columns):
            raise ValueError(f"table {self.name}: a column is declared twice")
        object.__setattr__(self, "_by_key", by_key)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.columns)

    def __getitem__(self, key: str) -> Column:
        return self._by_key[key]

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def __iter__(self):
        return iter(self.columns)

    def pick(self, *keys: str) -> list[Column]:
        """The named columns, in the order given (a screen shows a subset)."""
        return [self[k] for k in keys]


def _c(key: str, label: str, unit: str, kind: str, meaning: str, **kw) -> Column:
    return Column(key, label, unit, kind, meaning, **kw)


# --- shared definitions: the same words in every table that has them ---------------------------
_PHASE = _c("phase", "phase", "", "text", "the phase (`prefill`, `decode`, ...; `run` where no phase range encloses the rows)")
_STEP = _c("step", "step", "count", "int", "the step number within its phase")
_RANK = _c("rank", "rank", "count", "int", "the rank (GPU process); only on a multi-rank run")
_KERNELS = _c("kernels", "kernels", "count", "int", "timed rows (kernel launches; ops on a CPU-only run)")
_BUSY = _c("busy_ns", "busy", "ns", "ns", "the union of the kernel intervals")
_IDLE = _c("idle_ns", "idle", "ns", "ns", "span - busy: the GPU idle between kernels (launch gaps)")
_IDLE_FRAC = _c("idle_frac", "idle", "fraction", "pct", "idle / span")
_FLOPS = _c("flops", "FLOPs", "FLOP", "flops", "known floating-point operations: measured where counters exist, else modeled")
_BYTES = _c("bytes", "bytes", "B", "bytes", "known DRAM bytes: measured read + write where counters exist, else modeled")
_BYTES_SOURCE = _c("bytes_source", "bytes", "", "text", "where the bytes come from: `measured`, `model` or `mixed`")
_FLOPS_SOURCE = _c("flops_source", "FLOPs", "", "text", "where the FLOPs come from: `measured`, `model` or `mixed`")
_BYTES_COV = _c("bytes_coverage", "known", "fraction", "pct",
                "share of the kernel time whose bytes are known (host/peer copies left out)")
_FLOPS_COV = _c("flops_coverage", "FLOPs known", "fraction", "pct",
                "share of the compute kernels' time whose FLOPs are known")
_AI_COV = _c("ai_coverage", "AI known", "fraction", "pct",
             "share of the compute kernels' time whose FLOPs and bytes are both known")
_SPAN_TFLOPS = _c("tflops", "TFLOP/s", "TFLOP/s", "num", "achieved FLOP rate: known FLOPs / span (a lower bound below full coverage)", digits=2)
_SPAN_TBPS = _c("tbps", "TB/s", "TB/s", "num", "achieved bandwidth: known bytes / span (a lower bound below full coverage)", digits=2)
_MFU = _c("mfu", "MFU", "fraction", "pct", "achieved FLOP/s / peak FLOP/s of each kernel's compute dtype")
_MBU = _c("mbu", "MBU", "fraction", "pct", "achieved bandwidth / peak bandwidth")
_MBU_STATUS = _c("mbu_status", "MBU status", "", "text",
                 "`verdict` (bytes coverage >= 0.5), `lower bound` (>= 0.05) or `unknown`")
_MFU_STATUS = _c("mfu_status", "MFU status", "", "text",
                 "`verdict` (FLOPs coverage >= 0.5), `lower bound` (>= 0.05) or `unknown`")
_AI = _c("ai", "AI", "FLOP/B", "num", "arithmetic intensity: FLOPs / bytes over the kernels that have both")
_BOUND = _c("bound", "bound", "", "text",
            "the bound holding for at least 2/3 of the judged kernel time, each kernel against the ridge of its own "
            "compute dtype: `memory`, `compute` or `latency`; `mixed` where none does; null without peaks or below half "
            "coverage")
_BOUND_MIX = _c("bound_mix", "bound mix", "", "text",
                "the time-weighted mix of the kernels' own verdicts: per bound its share of the judged time and its "
                "kernels' share of their own peak; the verdict, its dtype and category, and the sentence (`text`)")
_TOKENS_PER_S = _c("tokens_per_s", "tok/s", "tokens/s", "num", "new tokens / span", digits=0, title="tokens/s")
_MODEL_MBU = _c("model_mbu", "model MBU", "fraction", "pct",
                "the bytes the model must move (weights, KV read and written) / span / peak bandwidth")
_MODEL_MBU_BUSY = _c("model_mbu_busy", "model MBU busy", "fraction", "pct", "model bytes / busy time / peak bandwidth")
_MODEL_MFU = _c("model_mfu", "model MFU", "fraction", "pct", "the model's FLOPs / span / peak FLOP/s")
_MODEL_MFU_BUSY = _c("model_mfu_busy", "model MFU busy", "fraction", "pct", "model FLOPs / busy time / peak FLOP/s")
_MODEL_BYTES = _c("model_bytes", "model bytes", "B", "bytes", "bytes the model must move: weights read once, KV read and written")
_MODEL_FLOPS = _c("model_flops", "model FLOPs", "FLOP", "flops", "2 x active parameters x tokens plus attention over the context")
_MODEL_REASON = _c("model_reason", "model", "", "text", "where the model-level numbers are unknown: why")
_MODEL_BOUND = _c("model_bound", "model bound", "", "text",
                  "`>=`: the model bytes and MBU are a lower bound (weights read once, KV written where the tokens "
                  "are known, no KV read): model_reason names the inputs the trace does not tell; null: exact")


PHASES = Table("phases", "one row per phase; on a multi-rank run, the lowest rank's", (
    _PHASE,
    _c("steps", "steps", "count", "int", "steps in the phase (rows outside any step are not a step)"),
    _KERNELS,
    _c("span_ns", "time", "ns", "ns", "the sum of the phase's step spans (time between steps is host work)"),
    _BUSY, _IDLE, _IDLE_FRAC, _FLOPS, _BYTES, _BYTES_SOURCE, _BYTES_COV, _FLOPS_SOURCE,
    _SPAN_TFLOPS, _SPAN_TBPS, _MFU, _MBU, _MODEL_MBU,
    _c("tokens", "tokens", "count", "int", "new tokens over the phase's steps, from the step metadata"),
    _TOKENS_PER_S, _AI, _BOUND,
    _c("mbu_datasheet", "MBU of datasheet", "fraction", "pct", "MBU against the datasheet bandwidth"),
    _c("mbu_measured", "MBU of measured", "fraction", "pct", "MBU against the calibrated (measured) bandwidth"),
    _c("mfu_datasheet", "MFU of datasheet", "fraction", "pct", "MFU against the datasheet FLOP/s"),
    _c("mfu_measured", "MFU of measured", "fraction", "pct", "MFU against the calibrated (measured) FLOP/s"),
    _c("model_steps", "model steps", "count", "int", "steps whose model-level bytes are known"),
    _MODEL_BYTES,
    _c("model_bytes_per_step", "model bytes/step", "B", "bytes", "model bytes / model steps"),
    _MODEL_FLOPS, _MODEL_MBU_BUSY, _MODEL_MFU, _MODEL_MFU_BUSY, _MODEL_REASON,
    _FLOPS_COV, _AI_COV, _MBU_STATUS, _MFU_STATUS, _MODEL_BOUND, _BOUND_MIX,
))

STEPS = Table("steps", "one row per (rank,) phase and step", (
    _RANK, _PHASE, _STEP, _KERNELS,
    _c("start_ns", "start", "ns", "ns", "the first kernel's start"),
    _c("span_ns", "span", "ns", "ns", "last kernel end - first kernel start"),
    _BUSY, _IDLE, _IDLE_FRAC, _FLOPS, _BYTES, _BYTES_SOURCE, _SPAN_TFLOPS, _SPAN_TBPS, _MFU, _MBU, _MODEL_MBU,
    _c("batch", "batch", "count", "int", "sequences in the step, from the step metadata or the workload"),
    _c("new_tokens", "new tokens", "count", "int", "tokens the step produces (prefill: the prompt tokens)"),
    _c("context", "context", "count", "int", "tokens of KV cache the step attends over"),
    _TOKENS_PER_S, _BOUND, _MODEL_BYTES,
    _c("model_weight_bytes", "weight bytes", "B", "bytes", "weights read once (MoE: the experts touched)"),
    _c("model_kv_read_bytes", "KV read", "B", "bytes", "KV cache read for the context"),
    _c("model_kv_write_bytes", "KV written", "B", "bytes", "KV cache written for the new tokens"),
    _MODEL_FLOPS,
    _c("experts_touched", "experts", "count", "num", "expected experts per layer the step's tokens touch (uniform routing)"),
    _MODEL_MBU_BUSY, _MODEL_MFU, _MODEL_MFU_BUSY,
    _c("model_ideal_ns", "model ideal", "ns", "ns", "max(model bytes / bandwidth, model FLOPs / peak)"),
    _MODEL_REASON,
    _c("workload_source", "workload", "", "text", "where batch, new tokens and context come from"),
    _FLOPS_SOURCE, _BYTES_COV, _FLOPS_COV, _AI, _AI_COV, _MBU_STATUS, _MFU_STATUS, _BOUND_MIX,
    _c("phase_source", "phase from", "", "text", "`marker`: the step marker names the phase; `inferred`: the step's own "
       "work (per-token kernel grids, CUDA-graph replays); null: no phase"),
    _c("phase_reason", "why", "", "text", "for an inferred phase, the evidence"),
    _MODEL_BOUND,
    _c("device", "device", "count", "int", "the GPU; only where one rank drives several (a row per device and step)"),
))

GROUPS = Table("groups", "one row per kernel group (short name, full name or category)", (
    _c("key", "kernel", "", "text", "the group: a short name, a full name or a category"),
    _c("category", "category", "", "text", "the kind of kernel (gemm, attention, norm, ...), the dominant one by time"),
    _c("phase", "phase", "", "text", "the phase with most of the group's time; `decode+`: also in another phase"),
    _c("count", "launches", "count", "int", "launches"),
    _c("time_ns", "time", "ns", "ns", "summed kernel time"),
    _c("time_share", "time %", "fraction", "pct", "share of all kernel time"),
    _c("mean_ns", "mean", "ns", "ns", "time / launches", digits=2),
    _FLOPS, _BYTES, _BYTES_SOURCE,
    _c("ai", "AI FLOP/B", "FLOP/B", "num", "arithmetic intensity over the launches whose FLOPs and bytes are both known"),
    _c("tflops", "TFLOP/s", "TFLOP/s", "num", "known FLOPs / time of the launches whose FLOPs are known", digits=2),
    _c("tbps", "TB/s", "TB/s", "num", "known bytes / time of the launches whose bytes are known", digits=2),
    _c("pct_of_roof", "% roof", "fraction", "pct",
       "achieved rate / attainable rate min(peak, bandwidth x AI); for copies, bandwidth / peak bandwidth"),
    _c("bound", "bound", "", "text", "`memory`, `compute` or `latency` (far under both roofs and short) for at least 2/3 "
       "of the judged time, each launch against its own dtype's ridge; `mixed` where none holds; null when not judged"),
    _c("dtype", "dtype", "", "text", "the compute dtype whose peak judges the group: from ncu instruction counters per "
       "pipe where the trace has them, else from the kernel names"),
    _c("peak_flops", "peak", "FLOP/s", "rate", "the peak FLOP/s of the group's compute dtype"),
    _FLOPS_SOURCE, _FLOPS_COV, _BYTES_COV, _AI_COV, _BOUND_MIX,
))

ROOFLINE = Table("roofline", "one point per kernel group (and phase): the groups whose AI and FLOP rate are known", (
    GROUPS["key"],
    _c("phase", "phase", "", "text", "the phase of the point (the same kernel is memory-bound in decode, compute-bound in prefill)"),
    GROUPS["category"], GROUPS["ai"],
    _c("achieved_flops", "FLOP/s", "FLOP/s", "rate", "the point's height: FLOPs / time of the launches whose FLOPs and bytes are known"),
    _c("achieved_bw", "B/s", "B/s", "rate", "the group's achieved bandwidth"),
    GROUPS["time_ns"], GROUPS["time_share"], GROUPS["pct_of_roof"], GROUPS["bound"],
    _FLOPS_COV, _BYTES_COV, _AI_COV, GROUPS["peak_flops"], GROUPS["dtype"], GROUPS["bound_mix"],
))

_GAP_PARTS = (
    _c("measured_ns", "measured", "ns", "ns", "measured span = ideal + slow kernels + extra bytes + launch gaps + unmodeled"),
    _c("ideal_ns", "ideal", "ns", "ns", "each costed kernel at its roofline time (basis kernels), or the model bytes at the roof"),
    _c("slow_kernels_ns", "slow kernels", "ns", "ns", "time of the costed kernels beyond their roofline time"),
    _c("extra_bytes_ns", "extra bytes", "ns", "ns", "roofline time of the measured bytes above the model's minimum"),
    _c("launch_gaps_ns", "launch gaps", "ns", "ns", "span - busy - edge idle: the GPU idle between kernels of the work"),
    _c("unmodeled_ns", "unmodeled", "ns", "ns", "time of kernels with no cost (norms, elementwise, copies): reported, not judged"),
    _c("ideal_frac", "ideal %", "fraction", "pct", "ideal / measured"),
    _c("basis", "basis", "", "text", "`kernels` (per-kernel costs cover half the kernel time), `model` (the step's model bytes); a phase whose steps differ: `mixed`; null: unknown (`basis_reason`)"),
)

# new keys of the gap tables (after the existing ones, so `report --json` keeps their order)
_GAP_NEW = (
    _c("copies_ns", "host copies", "ns", "ns", "time of host/peer copies (PCIe, NVLink-C2C, NVLink): judged against their link, not HBM, and not slow kernels"),
    _c("edge_idle_ns", "edge idle", "ns", "ns", "idle before the first or after the last compute kernel of the step (not launch gaps)"),
    _c("basis_reason", "why unknown", "", "text", "why the gap has no basis: per-kernel costs cover under half the kernel time and no model was given"),
)

GAP = Table("gap", "gap to ideal per phase, on one rank", (
    _PHASE, *_GAP_PARTS, *_GAP_NEW,
    _c("kernel_coverage", "costed", "fraction", "pct", "share of the phase's kernel time with per-kernel costs"),
))

GAP_STEPS = Table("gap_steps", "gap to ideal per step, on one rank", (
    _PHASE, _STEP, *_GAP_PARTS,
    _c("kernel_coverage", "costed", "fraction", "pct", "share of the step's kernel time with per-kernel costs"),
    *_GAP_NEW,
))

RANK_PHASES = Table("rank_phases", "the phase table of every rank (multi-rank runs)", (_RANK, *PHASES.columns))

RANK_STEPS = Table("rank_steps", "per step of a multi-rank run: how its time differs between ranks", (
    _PHASE, _STEP,
    _c("ranks", "ranks", "count", "int", "ranks that ran the step"),
    _c("min_ns", "min", "ns", "ns", "the fastest rank's step span"),
    _c("median_ns", "median", "ns", "ns", "the median rank's step span"),
    _c("max_ns", "max", "ns", "ns", "the slowest rank's step span"),
    _c("straggler", "straggler", "count", "int", "the slowest rank"),
    _c("spread", "spread", "fraction", "pct", "(max - min) / median"),
))

TABLES = (PHASES, STEPS, GROUPS, ROOFLINE, GAP, GAP_STEPS, RANK_PHASES, RANK_STEPS)


def markdown() -> str:
    """The registry as the Markdown tables `docs/definitions.md` carries (a test keeps them equal)."""
    out = []
    for t in TABLES:
        if t is RANK_PHASES:
            out += [f"### `{t.name}`", "", f"{t.meaning[0].upper()}{t.meaning[1:]}: `rank`, then the columns of `phases`.", ""]
            continue
        out += [f"### `{t.name}`", "", f"{t.meaning[0].upper()}{t.meaning[1:]}.", "",
                "| key | label | unit | meaning |", "|---|---|---|---|"]
        out += [f"| `{c.key}` | {c.label} | {c.unit or 'text'} | {c.meaning} |" for c in t]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


__all__ = ["Column", "Table", "KINDS", "PHASES", "STEPS", "GROUPS", "ROOFLINE", "GAP", "GAP_STEPS", "RANK_PHASES",
           "RANK_STEPS", "TABLES", "markdown"]
