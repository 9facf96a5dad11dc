"""Steps and phases: which marker starts a step, what the step did, and which GPU work belongs to it.

A *step marker* is a range whose name says "one engine iteration":

| source    | marker (as the tool writes it)                               | phase from              | index from |
|-----------|--------------------------------------------------------------|-------------------------|------------|
| user      | `--steps REGEX` (named groups `phase`, `tokens`, `step`)      | `phase` group           | `step` group, else order |
| vllm      | `execute_context_N(T)_generation_M(U)` (and the `execute_K_context_N(sq..)` detailed form) | N, M | order |
| sglang    | `step[EXTEND|DECODE|MIXED bs=B toks=T ...]`                   | the mode                | order |
| atom      | `prefill[bs=B tok=T ...]`, `decode[bs=B tok=T ...]`            | the word                | order |
| trtllm    | `[Executor] _forward_step I: C ctx reqs, G gen reqs`, `executeStep: C ctx reqs, G gen reqs` | C, G | I, else order |
| recorder  | `step=I` (rooftop's Recorder, inside a `prefill`/`decode` range) | the enclosing path   | I |
| profiler  | `ProfilerStep#I` (torch.profiler's schedule)                  | none                    | I |
| python    | Python-stack frames when nothing above is present: vLLM `gpu_worker.py(L): execute_model`, SGLang `model_runner.py(L): forward_extend/forward_decode`, Hugging Face: the outermost `transformers/models/...: forward` inside `generation/utils.py(L): generate` (the first of each generate is the prefill) | SGLang/HF: the frame | order |

Only the best source present in a trace is used (in the order of the table), and of nested markers
of that source only the outermost: a ProfilerStep around vLLM's annotation is not a second step.
vLLM writes the same name for every step, so a step's identity is its occurrence, never its name.

Which GPU work belongs to a step (`assign`): GPU work runs later than the CPU code that launched it,
so a step's window is on the GPU clock: the hull of the step's `gpu_user_annotation` spans (Kineto
writes them per stream, from the kernels correlated to the annotation) and of the GPU work launched
inside the step's CPU range on its thread, or on a thread without markers while the range was open
(the launch correlation: this covers kernels under nested annotations, which Kineto gives to the
inner span only, CUDA-graph replays, whose kernels carry the cudaGraphLaunch's correlation, and
autograd's or a communication thread's launches). A step with neither has no window (in a trace where
no step has one, the CPU ranges are the windows). Windows that would overlap are cut at the next
step's start.
Every kernel, copy and memset then belongs to the window it *starts in*, whoever launched it (another
thread, a graph, nothing recorded). Work outside every window is not a step: its step is null and its
phase says where it ran (`before first step`, `between steps`, `after last step`), so no analysis
mistakes it for a step.

Everything per row is vectorised (sorted windows, `np.searchsorted`); Python loops run over distinct
names and distinct threads only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .codes import categorical

BEFORE_FIRST_STEP = "before first step"
BETWEEN_STEPS = "between steps"
AFTER_LAST_STEP = "after last step"
OUTSIDE_STEPS = (BEFORE_FIRST_STEP, BETWEEN_STEPS, AFTER_LAST_STEP)

# The workload keys of a step's metadata entry (`meta["steps"]`): counts the marker states.
WORKLOAD_KEYS = ("prefill_requests", "prefill_tokens", "decode_requests", "decode_tokens", "new_tokens", "batch",
                 "context")

SOURCES = ("user", "vllm", "sglang", "atom", "trtllm", "recorder", "generic", "profiler", "python", "repeated")
_RANK = {s: i for i, s in enumerate(SOURCES)}
# serving-engine markers are one tier: a trace holds one engine's
_TIER = {"user": 0, "vllm": 1, "sglang": 1, "atom": 1, "trtllm": 1, "recorder": 2, "generic": 3, "profiler": 4,
         "python": 5, "repeated": 6}
# How each source's steps were found, as the report names the rule
RULES = {"user": "--steps pattern", "vllm": "vLLM step annotation", "sglang": "SGLang step span",
         "atom": "ATOM step range", "trtllm": "TensorRT-LLM _forward_step range", "recorder": "rooftop Recorder step=N",
         "generic": "hand-written step ranges (prefill/decode/step N/iteration N/forward)",
         "profiler": "torch.profiler ProfilerStep#N", "python": "Python stack frames",
         "repeated": "a repeated outermost range (same name or name + number, >= 3 times on one thread)"}


@dataclass(frozen=True)
class Marker:
    """What a step marker's name says."""

    source: str
    phase: str | None = None
    index: int | None = None  # None: numbered by occurrence
    workload: dict = field(default_factory=dict)

    @property
    def tier(self) -> int:
        return _TIER[self.source]


def phase_of_counts(prefill_requests: int | None, decode_requests: int | None) -> str | None:
    """prefill if only context requests ran, decode if only decode requests, mixed if both."""
    p, d = prefill_requests or 0, decode_requests or 0
    if p and d:
        return "mixed"
    return "prefill" if p else ("decode" if d else None)


def _workload(pr: int | None, pt: int | None, dr: int | None, dt: int | None) -> dict:
    out = {"prefill_requests": pr, "prefill_tokens": pt, "decode_requests": dr, "decode_tokens": dt}
    out["new_tokens"] = None if pt is None or dt is None else pt + dt
    out["batch"] = None if pr is None or dr is None else pr + dr
    return out


# --- engine markers -----------------------------------------------------------------------------

# Each engine's format strings, as its source builds them (docs/steps.md has the table with versions):
# vLLM v1 `Worker.annotate_profile` (vllm/v1/worker/gpu_worker.py):
#   A  f"execute_new_{num_new}_cached_{num_cached}"                  (176765855, PR #22496 .. v0.13.x)
#   B  "execute_context_" nc "(" ct ")_generation_" ng "(" gt ")"     (6ebe34d6f, PR #31193, v0.14.0 on)
#   C  "execute_" T "_context_" nc "(sq" ct "sk" .. "sqsq" .. "sqsk" .. ")_generation_" ng "(sq" gt "sk" ..
#      (`detailed_trace_annotation`, vllm/config/profiler.py; TraceLens patches v0.13-v0.25)
#   D  execute_context_nc(ct_Σct²)_generation_ng(gt)                  (a patched B200 build; TraceLens's regex)
_VLLM_NEW_CACHED = re.compile(r"^execute_new_(\d+)_cached_(\d+)$")
_VLLM = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
_VLLM_SQUARES = re.compile(r"execute_context_(\d+)\((\d+)_(\d+)\)_generation_(\d+)\((\d+)\)")
_VLLM_DETAILED = re.compile(r"execute_(\d+)_context_(\d+)\(sq(\d+)sk(\d+)sqsq\d+sqsk\d+\)"
                            r"_generation_(\d+)\(sq(\d+)sk(\d+)sqsq\d+sqsk\d+\)")
# SGLang `_build_step_span_name` (python/sglang/srt/model_executor/model_runner.py, PR #23419):
# f"step[EXTEND bs={bs} toks={ext_toks}]", else f"step[{mode.name} bs={bs}]" (+ optional k=v roofline fields)
_SGLANG = re.compile(r"^step\[([A-Z][A-Z_0-9]*)((?: \w+=\d+)*)\]$")
_SGLANG_DECODE_LIKE = ("DECODE", "TARGET_VERIFY", "VERIFY", "DRAFT", "DRAFT_EXTEND", "DRAFT_EXTEND_V2")
_ATOM = re.compile(r"^(prefill|decode)\[([^\]]*)\]")
# TensorRT-LLM PyExecutor._forward_step (tensorrt_llm/_torch/pyexecutor/py_executor.py), @nvtx_range:
#   f"_forward_step: {C} ctx reqs, {G} gen reqs"; f"[Executor] _forward_step: ..."; f"[Executor] _forward_step
#   {iter_counter}: ..."; f"... {iter_counter + 1}: ..."; and `executeStep: C ctx reqs, G gen reqs`
_TRTLLM = re.compile(r"(?:_forward_step(?:\s+(\d+))?|executeStep)\s*:\s*(\d+)\s+ctx reqs,\s*(?:(\d+)\s+ctx tokens,\s*)?"
                     r"(\d+)\s+gen reqs")
# vLLM's CUDA-graph capture ranges (vllm/profiler/graph_capture.py): capture, not a step
_CAPTURE = re.compile(r"^capture_\d+_(?:\w+_)?[A-Z_]+$")
_RECORDER = re.compile(r"^step[=_# ]?(\d+)$")
_PROFILER = re.compile(r"^ProfilerStep#(\d+)$")
_KV = re.compile(r"(\w+)=(\d+)")
# A name that looks like an engine's step marker: one the parsers above do not read is reported
_LOOKS_LIKE_STEP = re.compile(r"^execute_(?:context|new|\d+_context)|^step\[|_forward_step\b|^executeStep\b"
                              r"|^ProfilerStep\b")


def _int(v: Any) -> int | None:
    try:
        i = int(v)
    except (TypeError, ValueError):
        return None
    return i if 0 <= i < 2**31 else None


def looks_like_step_marker(name: str) -> bool:
    """A name in an engine's step-marker family (vLLM `execute_...`, SGLang `step[...]`, TensorRT-LLM
    `_forward_step`, `ProfilerStep`) that `parse_marker` does not read: a format rooftop does not know."""
    return bool(_LOOKS_LIKE_STEP.search(name)) and parse_marker(name) is None and not _CAPTURE.match(name)


def _engine_marker(name: str) -> Marker | None:
    m = _VLLM.search(name)
    if m:
        n, t, g, u = (int(x) for x in m.groups())
        return Marker("vllm", phase_of_counts(n, g), None, _workload(n, t, g, u))
    m = _VLLM_SQUARES.search(name)
    if m:  # (ct_Σct²): the sum of squares is the prefill's attention work, not a count
        n, t, _sq, g, u = (int(x) for x in m.groups())
        return Marker("vllm", phase_of_counts(n, g), None, _workload(n, t, g, u))
    m = _VLLM_DETAILED.search(name)
    if m:
        _t, n, ct, _csk, g, gt, gsk = (int(x) for x in m.groups())
        wl = _workload(n, ct, g, gt)
        if g and not n:  # sk: the decoding sequences' KV lengths summed; context is per sequence
            wl["context"] = gsk / g
        return Marker("vllm", phase_of_counts(n, g), None, wl)
    m = _VLLM_NEW_CACHED.match(name)
    if m:
        # "cached" is any running request (a later prefill chunk or a decode): no phase unless only new
        # requests ran (all of them prefilling)
        n, c = int(m.group(1)), int(m.group(2))
        wl = {"batch": n + c, "new_requests": n, "cached_requests": c}
        if c == 0 and n:
            wl.update(prefill_requests=n, decode_requests=0, decode_tokens=0)
        return Marker("vllm", "prefill" if (c == 0 and n) else None, None, wl)
    m = _SGLANG.match(name)
    if m:
        kv = {k: int(v) for k, v in _KV.findall(m.group(2))}
        bs, toks, mode = kv.get("bs"), kv.get("toks"), m.group(1)
        if mode in _SGLANG_DECODE_LIKE:  # one new token per request (more with speculative decoding: g_sq)
            dt = kv.get("g_sq", bs if mode == "DECODE" else None)
            wl = _workload(0, 0, bs, dt)
            if mode == "DECODE" and bs and "g_sk" in kv:
                wl["context"] = kv["g_sk"] / bs
            return Marker("sglang", "decode", None, wl)
        if mode == "EXTEND":
            return Marker("sglang", "prefill", None, _workload(bs, toks if toks is not None else kv.get("c_sq"), 0, 0))
        if mode == "MIXED":
            c, g = kv.get("c"), kv.get("g")
            wl = _workload(c, kv.get("c_sq"), g, kv.get("g_sq"))
            wl["batch"] = bs if wl["batch"] is None else wl["batch"]
            return Marker("sglang", "mixed", None, wl)
        # IDLE (data-parallel attention, nothing scheduled) and modes not known: a step, no phase
        return Marker("sglang", None, None, {"batch": bs} if bs is not None else {})
    m = _ATOM.match(name)
    if m:
        kv = {k: int(v) for k, v in _KV.findall(m.group(2))}
        bs, tok = kv.get("bs"), kv.get("tok")
        if m.group(1) == "prefill":
            return Marker("atom", "prefill", None, _workload(bs, tok, 0, 0))
        return Marker("atom", "decode", None, _workload(0, 0, bs, tok))
    m = _TRTLLM.search(name)
    if m:
        c, g = int(m.group(2)), int(m.group(4))
        ct = _int(m.group(3))
        # request counts only: a context request's prompt length is not in the name (but see `ctx tokens`)
        wl = {"prefill_requests": c, "decode_requests": g, "batch": c + g}
        if ct is not None:
            wl["prefill_tokens"] = ct
        if g == 0 and ct is not None:
            wl.update(decode_tokens=0, new_tokens=ct)
        if c == 0:
            wl.update(prefill_tokens=0, decode_tokens=g, new_tokens=g)
        return Marker("trtllm", phase_of_counts(c, g), _int(m.group(1)), wl)
    return None


# --- hand-written step ranges (NVTX / record_function in users' own loops) ------------------------

# prefill / decode / forward, `DECODE_STEP_007`, `decode_step_3_B8_T512`, `step 3`, `iteration 12`,
# `generate_kv_iter_4`, `token_17_generation` (docs/steps.md lists where each was seen)
_GENERIC = re.compile(
    r"(?i)^(?:(?P<phase>prefill|decode)(?:_phase|_step)?(?:[ _#=]?(?P<n1>\d+)(?:_\w*)?)?"
    r"|(?:step|iteration|iter)[ _#=]?(?P<n2>\d+)"
    r"|\w*_iter_(?P<n3>\d+)"
    r"|token_(?P<n4>\d+)_generation"
    r"|forward)$")


def _generic_marker(name: str) -> Marker | None:
    m = _GENERIC.match(name)
    if not m:
        return None
    ph = m.group("phase")
    num = next((m.group(k) for k in ("n1", "n2", "n3", "n4") if m.group(k) is not None), None)
    return Marker("generic", ph.lower() if ph else None, _int(num))


# --- Python-stack markers (traces recorded with_stack and no annotation) ------------------------

# vLLM v1: Worker.execute_model (vllm/v1/worker/gpu_worker.py) around GPUModelRunner.execute_model
# (gpu_model_runner.py); line numbers change with every version. `_dummy_run` (warm-up, capture) is not one.
_PY_VLLM = re.compile(r"(?:^|/)(?:gpu_worker|gpu_model_runner)\.py\(\d+\): execute_model$")
_PY_SGLANG = re.compile(r"(?:^|/)model_runner\.py\(\d+\): forward_(extend|decode)$")
_PY_HF_GENERATE = re.compile(r"(?:^|/)transformers/generation/utils\.py\(\d+\): generate$")
_PY_HF_FORWARD = re.compile(r"(?:^|/)transformers/models/[^/]+/modeling_\w+\.py\(\d+\): forward$")
PYTHON_FRAME = re.compile("|".join(p.pattern for p in (_PY_VLLM, _PY_SGLANG, _PY_HF_GENERATE, _PY_HF_FORWARD)))


def wanted_python_frame(name: str) -> bool:
    """Whether a `python_function` event can matter for steps (importers keep only these)."""
    return bool(PYTHON_FRAME.search(name))


# --- the user's pattern ------------------------------------------------------------------------

_user: re.Pattern | None = None


def compile_user_pattern(text: str) -> re.Pattern:
    """`--steps REGEX`: a regular expression searched in range names; named groups `phase`
    (prefill/decode/mixed, or any word), `tokens` (new tokens of the step) and `step` (its number).
    Raises ValueError with a one-line reason."""
    try:
        rx = re.compile(text)
    except re.error as exc:
        raise ValueError(f"--steps {text!r} is not a regular expression: {exc}") from None
    unknown = set(rx.groupindex) - {"phase", "tokens", "step"}
    if unknown:
        raise ValueError(f"--steps: unknown named group(s) {sorted(unknown)} (use phase, tokens, step)")
    return rx


def set_user_pattern(text: str | re.Pattern | None) -> None:
    """Make `--steps` the step marker of every trace imported afterwards in this process."""
    global _user
    _user = compile_user_pattern(text) if isinstance(text, str) else text


def user_pattern() -> re.Pattern | None:
    return _user


def _user_marker(name: str, rx: re.Pattern) -> Marker | None:
    m = rx.search(name)
    if not m:
        return None
    g = m.groupdict()
    phase = g.get("phase")
    phase = phase.lower() if phase else None
    phase = "prefill" if phase in ("extend", "context", "ctx") else phase
    tokens = _int(g.get("tokens"))
    return Marker("user", phase, _int(g.get("step")), {} if tokens is None else {"new_tokens": tokens})


def parse_marker(name: str | None, user: re.Pattern | None = None) -> Marker | None:
    """The marker a range name is, or None. With a user pattern, only it counts."""
    if not name:
        return None
    if user is not None:
        return _user_marker(name, user)
    mk = _engine_marker(name)
    if mk is not None:
        return mk
    m = _RECORDER.match(name)
    if m:
        return Marker("recorder", None, _int(m.group(1)))
    m = _PROFILER.match(name)
    if m:
        return Marker("profiler", None, _int(m.group(1)))
    return _generic_marker(name)


# --- NVTX / annotation paths (phase, step, layer of one path) -----------------------------------

_STEP_RE = re.compile(r"(?:^|/)(?:step[=_# ]?|ProfilerStep#)(\d+)(?:/|$)")
# A layer: `layer=3`, `layer_12_computation`, a module path's `layers.7.` / `block.3.` / `h.5.` (GPT-2),
# else a module path's list index (`encoder.0.conv`: letters on both sides, so no version number).
# No lookahead (the same pattern runs in Arrow's RE2): the character after the number is consumed.
_LAYER_RE = re.compile(r"(?:^|[/.: ])(?:layers?[=_.# ]?|blocks?[=_.# ]?|h\.)(\d+)(?:[/._ ]|$)")
_LAYER_DOT_RE = re.compile(r"(?:^|[/: ])[A-Za-z_]+(?:\.[A-Za-z_]+)*\.(\d+)\.[A-Za-z_]")
_LAYER_RE2 = _LAYER_RE.pattern.replace(r"(\d+)", r"(?P<n>\d+)")  # the same, for Arrow (named group)
_LAYER_DOT_RE2 = _LAYER_DOT_RE.pattern.replace(r"(\d+)", r"(?P<n>\d+)")
_PHASE_RE = re.compile(r"(?:^|/)(prefill|decode)(?=/|$|[=_ ])", re.IGNORECASE)
# SGLang's profiler labels forward passes with the forward mode.
_SGLANG_RE = re.compile(r"(?:forward_)?(extend|prefill|decode)(?:_batch)?\b", re.IGNORECASE)


def parse_path(path: str | None) -> tuple[str | None, int | None, int | None]:
    """(phase, step, layer) from a path like `decode/step=12/layer=3/attn`; None where absent.

    The step number is the one the path names; a marker that repeats its name (vLLM) gets its
    step from the importer (`assign`), not from here."""
    if not path:
        return None, None, None
    phase = None
    m = _PHASE_RE.search(path)
    if m:
        phase = m.group(1).lower()
    else:
        for seg in reversed(path.split("/")):  # the innermost engine marker says the phase
            mk = _engine_marker(seg)
            if mk is not None and mk.phase:
                phase = mk.phase
                break
        else:
            s = _SGLANG_RE.search(path)
            if s:
                phase = "prefill" if s.group(1).lower() in ("extend", "prefill") else "decode"
    m = _STEP_RE.search(path)
    step = _int32(m.group(1)) if m else None
    return phase, step, parse_layer(path)


def parse_layer(path: str | None) -> int | None:
    """The layer a path names (`.../layer=3/...`), or None: `parse_path`'s third value alone."""
    m = (_LAYER_RE.search(path) or _LAYER_DOT_RE.search(path)) if path else None
    return _int32(m.group(1)) if m else None


def _int32(digits: str) -> int | None:
    """A step or layer number; one that does not fit the int32 column is not a number we can use."""
    v = int(digits[:12])
    return v if len(digits) <= 10 and v < 2**31 else None


def parse_paths(paths: pd.Series, full: np.ndarray | None = None) -> pd.DataFrame:
    """Vectorised `parse_path` -> DataFrame(phase, step, layer) aligned with `paths` (phase: a
    categorical, missing where none). Each distinct path is parsed once; `full` (a row mask) limits
    the phase and step to those rows' paths (the others get the layer alone, the cheap part: a
    million-kernel trace holds ~350k distinct paths, most already placed by the importer)."""
    codes, uniq = pd.factorize(paths, use_na_sentinel=True)
    uniq = np.asarray(uniq, dtype=object)
    if full is None:
        wanted = np.arange(len(uniq))
    else:
        mask = np.zeros(len(uniq), dtype=bool)
        c = codes[np.asarray(full, dtype=bool)]
        mask[c[c >= 0]] = True
        wanted = np.flatnonzero(mask)
    phase = np.full(len(uniq), None, dtype=object)
    step = np.full(len(uniq) + 1, np.nan)  # the last entry: code -1, no path
    arrow = _plain_texts(uniq)  # (converted to Arrow once, for the phases, steps and layers)
    found, steps_found = _phases_and_steps(uniq[wanted], None if arrow is None else (arrow[0].take(wanted),
                                                                                    arrow[1][wanted]))
    phase[wanted] = found
    step[wanted] = steps_found
    layers = np.append(parse_layers(uniq, arrow), np.nan)
    return pd.DataFrame({
        "phase": categorical(phase, codes),
        "step": pd.array(step[codes], dtype="Int32"),
        "layer": pd.array(layers[codes], dtype="Int32"),
    }, index=paths.index)


def _phases_and_steps(paths: np.ndarray, arrow: tuple | None = ...) -> tuple[np.ndarray, np.ndarray]:
    """`parse_path`'s phase (object, None where none) and step (float64, NaN where none) of each
    path (an object array of texts). Plain ASCII paths that name their phase take Arrow's regex
    engine, all at once, as `parse_layers` does (a lookahead RE2 lacks is a consumed character
    there: the same first match); any other path (one whose phase an engine marker names, say)
    takes `parse_path`. `arrow`: `_plain_texts(paths)`, where the caller has it."""
    phase = np.full(len(paths), None, dtype=object)
    step = np.full(len(paths), np.nan)
    arrow = _plain_texts(paths) if arrow is ... else arrow
    rest = np.arange(len(paths)) if arrow is None else np.flatnonzero(~arrow[1])
    if arrow is not None and len(rest) < len(paths):
        import pyarrow as pa
        import pyarrow.compute as pc

        arr, plain = arrow
        where = np.flatnonzero(plain)
        sub = arr.take(pa.array(where))
        named = pc.extract_regex(sub, _PHASE_RE2)
        ok = named.is_valid().to_numpy(zero_copy_only=False)
        phase[where[ok]] = np.asarray(pc.utf8_lower(named.field("p").filter(pa.array(ok))).to_pylist(), dtype=object)
        step[where] = _numbers(pc.extract_regex(sub, _STEP_RE2))
        rest = np.sort(np.concatenate([rest, where[~ok]]))  # no phase named: the engine markers' turn
    for i in rest.tolist():
        ph, st, _ = parse_path(paths[i])
        phase[i] = ph
        step[i] = np.nan if st is None else st
    return phase, step


# `_PHASE_RE` and `_STEP_RE` for Arrow: a named group, and the lookahead consumed
_PHASE_RE2 = r"(?i)(?:^|/)(?P<p>prefill|decode)(?:/|$|[=_ ])"
_STEP_RE2 = _STEP_RE.pattern.replace(r"(\d+)", r"(?P<n>\d+)")


def _plain_texts(paths: np.ndarray) -> tuple[Any, np.ndarray] | None:
    """(the paths as an Arrow array, which of them are plain: ASCII without a newline, where RE2
    and Python's `re` match alike), or None if they are not all texts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = pa.array(paths, type=pa.string(), from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    plain = pc.and_(pc.string_is_ascii(arr), pc.invert(pc.match_substring(arr, "\n"))).fill_null(False)
    return arr, plain.to_numpy(zero_copy_only=False)


def _numbers(match: Any) -> np.ndarray:
    """The `n` group of an Arrow regex match as `_int32` reads it (float64, NaN where none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(match), np.nan)
    found = match.field("n")  # (its entries under a null match are not nulls themselves)
    ok = match.is_valid().to_numpy(zero_copy_only=False) & (pc.utf8_length(found).fill_null(99).to_numpy() <= 10)
    if ok.any():
        digits = found.filter(pa.array(ok)).cast(pa.int64()).to_numpy()
        out[np.flatnonzero(ok)] = np.where(digits < 2**31, digits, np.nan)
    return out


def parse_layers(paths: np.ndarray, arrow: tuple | None = ...) -> np.ndarray:
    """`parse_layer` of each path (object array of texts or None) -> float64, NaN where none.

    Plain ASCII paths take Arrow's regex engine (RE2), all at once: a million-kernel trace holds
    ~350k distinct paths, slow one at a time. The pattern means the same there for ASCII text
    without newlines (RE2's `\\d` is ASCII, its `$` is the very end); other paths take `parse_layer`.
    `arrow`: `_plain_texts(paths)`, where the caller has it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(paths), np.nan)
    if not len(paths):
        return out
    if arrow is ...:
        arrow = _plain_texts(paths)
    arr, plain = arrow if arrow is not None else (None, np.zeros(len(paths), dtype=bool))
    if plain.any():
        where = np.flatnonzero(plain)
        sub = arr.take(pa.array(where))
        out[where] = _numbers(pc.extract_regex(sub, _LAYER_RE2))
        rest = np.isnan(out[where])
        if rest.any():
            out[where[rest]] = _numbers(pc.extract_regex(sub.filter(pa.array(rest)), _LAYER_DOT_RE2))
    for i in np.flatnonzero(~plain).tolist():
        v = parse_layer(paths[i])
        if v is not None:
            out[i] = v
    return out


# --- finding the steps of one trace ------------------------------------------------------------

@dataclass
class Steps:
    """The step occurrences of a trace, in time order (arrays aligned)."""

    thread: np.ndarray   # int64: the CPU thread of the marker
    start: np.ndarray    # int64 ns: CPU range
    end: np.ndarray
    row: np.ndarray      # int64: index of the marker among the importer's ranges (-1: a Python frame)
    phase: list
    index: np.ndarray    # int64
    entries: list        # the `meta["steps"]` entry of each
    warnings: list = field(default_factory=list)  # step-like names no parser read
    rule: str | None = None  # how the steps were found (`RULES`), None: no steps

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> "Steps":
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, [], z, [])


def outermost(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of the intervals no other interval of the same thread encloses (ranges nest per thread).

    Sorted by (thread, start, longest first), an interval is enclosed iff an earlier one on its thread
    ends after it starts: a running max of the ends per thread, without the interval itself."""
    n = len(start)
    if not n:
        return np.zeros(0, bool)
    order = np.lexsort((-(end - start), start, thread))
    th, s, e = thread[order], start[order], end[order]
    run = pd.Series(e).groupby(th).cummax().to_numpy()
    prev = np.empty(n, dtype=np.int64)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = run[:-1]
    prev[np.r_[True, th[1:] != th[:-1]]] = np.iinfo(np.int64).min
    out = np.empty(n, bool)
    out[order] = s >= prev
    return out


def find_steps(names: Sequence, paths: Sequence, thread: np.ndarray, start: np.ndarray, end: np.ndarray,
               py: tuple | None = None, user: re.Pattern | None = None,
               name_ids: tuple[np.ndarray, Sequence] | None = None, launches: tuple | None = None) -> Steps:
    """The step occurrences among ranges (annotations, NVTX) and, failing those, Python frames.

    `names`/`paths`: each range's own label and its path (enclosing labels joined by "/");
    `py`: (thread, start, end, names) of the Python frames kept (`wanted_python_frame`);
    `name_ids`: the labels again as (each range's index into a table, the table), where the
    importer has them so (then each distinct label is looked at once, never a row of them);
    `launches`: (thread, time) of the GPU work's launches: with them, failing every marker, a repeated
    outermost range that launched GPU work is a step (`_repeated_steps`)."""
    thread, start, end = (np.asarray(a, dtype=np.int64) for a in (thread, start, end))
    ids, marks, tier = _marker_tiers(names, name_ids, user)
    warnings = _unknown_markers(ids, marks, names, name_ids) if user is None else []
    out = Steps.empty()
    if len(tier) and tier.min() < _NO_TIER:
        idx = np.flatnonzero(tier == tier.min())
        if marks[ids[idx[0]]].source == "generic":
            idx = _generic_roots(idx, ids, marks, thread, start, end)
        else:
            idx = idx[outermost(thread[idx], start[idx], end[idx])]
        order = np.argsort(start[idx], kind="stable")
        idx = idx[order]
        chosen = [marks[i] for i in ids[idx].tolist()]
        phases = []
        for i, mk in zip(idx.tolist(), chosen):
            ph = mk.phase
            if ph is None and mk.source in ("recorder", "user", "generic"):
                ph = parse_path(paths[i])[0]  # the Recorder's `decode/step=3`, a loop's `DECODE_LOOP/step 3`
            phases.append(ph)
        out = _numbered(thread[idx], start[idx], end[idx], idx, phases, chosen, [names[i] for i in idx.tolist()])
    elif py is not None and user is None and len(py[1]):
        out = _python_steps(*py)
    if not len(out) and user is None and launches is not None:
        out = _repeated_steps(ids, names, name_ids, thread, start, end, launches)
    out.warnings = warnings
    if len(out):
        out.rule = RULES[out.entries[0]["source"]]
    return out


def _generic_roots(idx: np.ndarray, ids: np.ndarray, marks: dict, thread, start, end) -> np.ndarray:
    """Of hand-written step ranges, the steps: numbered ones (`DECODE_STEP_3`, `step 3`) outermost among
    themselves, and unnumbered ones (`prefill`, `decode`, `forward`) that hold no numbered one (a
    `decode` range around the numbered decode steps is their loop, not one step)."""
    numbered = np.array([marks[i].index is not None for i in ids[idx].tolist()], dtype=bool)
    num, plain = idx[numbered], idx[~numbered]
    num = num[outermost(thread[num], start[num], end[num])]
    plain = plain[outermost(thread[plain], start[plain], end[plain])]
    if len(num) and len(plain):
        holder = locate_on_threads(thread[plain], start[plain], end[plain], thread[num], start[num])
        plain = np.delete(plain, np.unique(holder[holder >= 0]))
    return np.concatenate([num, plain])


def _unknown_markers(ids: np.ndarray, marks: dict, names: Sequence, name_ids) -> list[str]:
    """One warning naming the step-like labels (`looks_like_step_marker`) no parser read."""
    table = name_ids[1] if name_ids is not None else None
    seen = []
    for i in np.unique(ids[ids >= 0]).tolist():
        if i in marks:
            continue
        label = table[i] if table is not None else None
        if label is None:
            label = names[int(np.flatnonzero(ids == i)[0])]
        if isinstance(label, str) and looks_like_step_marker(label):
            seen.append(label)
    if not seen:
        return []
    shown = ", ".join(repr(x[:80]) for x in seen[:3]) + (f" and {len(seen) - 3} more" if len(seen) > 3 else "")
    return [f"{len(seen)} range name(s) look like step markers but match no known format: {shown} "
            "(pass --steps REGEX to use them)"]


# Ranges that are operators or module frames, not a loop body: never steps by repetition
_NOT_A_LOOP = re.compile(r"^(?:aten::|nn\.Module:|cuda|cu[A-Z]|nccl|c10d::|ProfilerStep#)|, op_id = \d+$|^\w+::")


def _repeated_steps(ids: np.ndarray, names: Sequence, name_ids, thread, start, end, launches: tuple) -> Steps:
    """Steps when no marker exists: the outermost ranges of one thread that launched GPU work and whose
    name, digits aside, repeats at least `REPEAT_MIN` times (`decode 0`, `decode 1`, ...; or one name again and again). Of several such
    names, the one with the most occurrences (then the most time). Operator ranges (`aten::`, emit_nvtx's
    `op_id =`) are never steps."""
    n = len(start)
    if n < REPEAT_MIN:
        return Steps.empty()
    table = name_ids[1] if name_ids is not None else pd.unique(np.asarray(names, dtype=object))
    if name_ids is None:
        ids, table = pd.factorize(np.asarray(names, dtype=object))
    key_of = {}
    for i in np.unique(ids[ids >= 0]).tolist():
        label = table[i]
        if isinstance(label, str) and label and not _NOT_A_LOOP.search(label):
            key_of[i] = _DIGITS.sub("#", label)
    if not key_of:
        return Steps.empty()
    keys = sorted(set(key_of.values()))
    kid = {k: j for j, k in enumerate(keys)}
    code = np.full(len(table) + 1, -1, dtype=np.int64)
    for i, k in key_of.items():
        code[i] = kid[k]
    rk = code[ids]
    top = outermost(thread, start, end)
    cand = np.flatnonzero(top & (rk >= 0))
    if len(cand) < REPEAT_MIN:
        return Steps.empty()
    # a step does GPU work: a range that launched none (a host-side pass, a compiler's) is no step
    hit = locate_on_threads(thread[cand], start[cand], end[cand], np.asarray(launches[0], np.int64),
                            np.asarray(launches[1], np.int64))
    cand = cand[np.unique(hit[hit >= 0])]
    if len(cand) < REPEAT_MIN:
        return Steps.empty()
    df = pd.DataFrame({"t": thread[cand], "k": rk[cand], "d": end[cand] - start[cand]})
    g = df.groupby(["t", "k"]).agg(n=("d", "size"), d=("d", "sum")).reset_index()
    g = g[g["n"] >= REPEAT_MIN]
    if g.empty:
        return Steps.empty()
    best = g.sort_values(["n", "d"], ascending=False).iloc[0]
    idx = cand[(df["t"].to_numpy() == best["t"]) & (df["k"].to_numpy() == best["k"])]
    idx = idx[np.argsort(start[idx], kind="stable")]
    labels = [table[i] for i in ids[idx].tolist()]
    marks = []
    for label in labels:
        m = _DIGITS.search(label)
        marks.append(Marker("repeated", None, _int(m.group()) if m and len(_DIGITS.findall(label)) == 1 else None))
    phases = [parse_path(label)[0] for label in labels]
    return _numbered(thread[idx], start[idx], end[idx], idx, phases, marks, labels)


REPEAT_MIN = 3
_DIGITS = re.compile(r"\d+")


_NO_TIER = np.iinfo(np.int64).max  # a range that is no step marker


def _marker_tiers(names: Sequence, name_ids: tuple[np.ndarray, Sequence] | None,
                  user: re.Pattern | None) -> tuple[np.ndarray, dict, np.ndarray]:
    """(each range's label as an index into a table of labels; each distinct label's marker by that
    index, for those that are markers; each range's marker tier, `_NO_TIER` where it is none)."""
    if name_ids is None:
        ids, table = pd.factorize(np.asarray(names, dtype=object))  # (a missing label: -1)
    else:
        ids, table = np.asarray(name_ids[0], dtype=np.int64), name_ids[1]
    marks = {}
    for i in np.unique(ids[ids >= 0]).tolist():
        label = table[i]
        m = parse_marker(label, user) if isinstance(label, str) else None
        if m is not None:
            marks[i] = m
    tier_of = np.full(len(table) + 1, _NO_TIER, dtype=np.int64)  # (the last: a missing label's, -1)
    for i, m in marks.items():
        tier_of[i] = m.tier
    return ids, marks, tier_of[ids]


def _numbered(thread, start, end, row, phases, marks, labels) -> Steps:
    """Indices: what the name says, else the occurrence's order (0-based, in time order)."""
    named = [m.index for m in marks]
    if all(i is not None for i in named) and len(set(zip(phases, named))) == len(named):
        index = np.array(named, dtype=np.int64)
    else:
        index = np.arange(len(marks), dtype=np.int64)
    entries = []
    for ph, i, m, label in zip(phases, index.tolist(), marks, labels):
        entry = {"phase": ph, "index": i, "marker": label, "source": m.source}
        entry.update({k: m.workload[k] for k in WORKLOAD_KEYS if m.workload.get(k) is not None})
        entries.append(entry)
    return Steps(np.asarray(thread, np.int64), np.asarray(start, np.int64), np.asarray(end, np.int64),
                 np.asarray(row, np.int64), phases, index, entries)


def _python_steps(thread, start, end, names) -> Steps:
    thread, start, end = (np.asarray(a, dtype=np.int64) for a in (thread, start, end))
    names = list(names)
    kinds = {n: ("vllm" if _PY_VLLM.search(n) else "sglang" if _PY_SGLANG.search(n) else
                 "generate" if _PY_HF_GENERATE.search(n) else "forward" if _PY_HF_FORWARD.search(n) else None)
             for n in set(names) if isinstance(n, str)}
    kind = np.array([kinds.get(n) for n in names], dtype=object)
    for engine in ("vllm", "sglang"):
        idx = np.flatnonzero(kind == engine)
        if len(idx):
            idx = idx[outermost(thread[idx], start[idx], end[idx])]
            idx = idx[np.argsort(start[idx], kind="stable")]
            marks, phases = [], []
            for i in idx.tolist():
                m = _PY_SGLANG.search(names[i]) if engine == "sglang" else None
                ph = None if m is None else ("prefill" if m.group(1) == "extend" else "decode")
                phases.append(ph)
                marks.append(Marker("python", ph))
            return _numbered(thread[idx], start[idx], end[idx], np.full(len(idx), -1), phases, marks,
                             [names[i] for i in idx.tolist()])
    gen, fwd = np.flatnonzero(kind == "generate"), np.flatnonzero(kind == "forward")
    if not len(gen) or not len(fwd):
        return Steps.empty()
    # Hugging Face: each outermost model forward inside a generate call is one step
    gen = gen[outermost(thread[gen], start[gen], end[gen])]
    fwd = fwd[outermost(thread[fwd], start[fwd], end[fwd])]
    owner = locate_on_threads(thread[gen], start[gen], end[gen], thread[fwd], start[fwd])
    fwd, owner = fwd[owner >= 0], owner[owner >= 0]
    order = np.lexsort((start[fwd], owner))
    fwd, owner = fwd[order], owner[order]
    first = np.r_[True, owner[1:] != owner[:-1]] if len(owner) else np.zeros(0, bool)
    phases = ["prefill" if f else "decode" for f in first.tolist()]
    order = np.argsort(start[fwd], kind="stable")
    fwd = fwd[order]
    phases = [phases[i] for i in order.tolist()]
    marks = [Marker("python", p) for p in phases]
    return _numbered(thread[fwd], start[fwd], end[fwd], np.full(len(fwd), -1), phases, marks,
                     [names[i] for i in fwd.tolist()])


def locate_on_threads(wthread: np.ndarray, wstart: np.ndarray, wend: np.ndarray,
                      qthread: np.ndarray, qtime: np.ndarray) -> np.ndarray:
    """For each query (thread, time): the window of that thread holding it, or -1. The windows of
    one thread must not overlap (outermost markers). A loop over distinct threads only."""
    out = np.full(len(qtime), -1, dtype=np.int64)
    if not len(wstart) or not len(qtime):
        return out
    for th in np.unique(wthread):
        w = np.flatnonzero(wthread == th)
        w = w[np.argsort(wstart[w], kind="stable")]
        q = np.flatnonzero(qthread == th)
        if not len(q):
            continue
        pos = np.searchsorted(wstart[w], qtime[q], side="right") - 1
        ok = (pos >= 0) & (qtime[q] < wend[w][pos.clip(0)])
        out[q[ok]] = w[pos[ok]]
    return out


# --- GPU work -> steps ---------------------------------------------------------------------------

def gpu_windows(steps: Steps, gpu_start: np.ndarray, gpu_end: np.ndarray, launch_thread: np.ndarray,
                launch_time: np.ndarray, spans: tuple | None = None) -> tuple[np.ndarray, np.ndarray, list]:
    """Each step's window on the GPU clock: the hull of its GPU annotation spans (`spans`: (step
    position, start, end) arrays) and of the GPU work launched inside its CPU range on its thread;
    start > end for a step with neither, unless no step has either: then the CPU ranges.
    Returns (start, end, how)."""
    n = len(steps)
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    how = [None] * n
    if spans is not None and len(spans[0]):
        k, s, e = (np.asarray(a, dtype=np.int64) for a in spans)
        ok = k >= 0
        np.minimum.at(lo, k[ok], s[ok])
        np.maximum.at(hi, k[ok], e[ok])
        for i in np.unique(k[ok]).tolist():
            how[i] = "gpu annotation"
    launched = locate_on_threads(steps.thread, steps.start, steps.end, launch_thread, launch_time)
    # launched from a thread without step markers (autograd's backward thread, a communication
    # thread): the step whose CPU range was open then, on whatever thread
    other = np.flatnonzero((launched < 0) & ~np.isin(launch_thread, steps.thread))
    if len(other) and n:
        order = np.argsort(steps.start, kind="stable")
        cut = steps.end[order].copy()
        cut[:-1] = np.minimum(cut[:-1], steps.start[order][1:])
        zeros = np.zeros(n, np.int64)
        hit = locate_on_threads(zeros, steps.start[order], cut, np.zeros(len(other), np.int64), launch_time[other])
        launched[other[hit >= 0]] = order[hit[hit >= 0]]
    ok = launched >= 0
    if ok.any():
        before_lo, before_hi = lo.copy(), hi.copy()
        np.minimum.at(lo, launched[ok], gpu_start[ok])
        np.maximum.at(hi, launched[ok], gpu_end[ok])
        grew = np.flatnonzero((lo != before_lo) | (hi != before_hi))
        for i in grew.tolist():
            how[i] = "launches" if how[i] is None else "gpu annotation + launches"
    # no GPU work tied to any step (no launch records, no GPU spans): the CPU ranges, the only clock
    # there is. Never for some steps only: a CPU range would overlap the GPU windows of earlier steps,
    # which run behind the CPU, and take their kernels.
    if n and (lo > hi).all():
        lo, hi = steps.start.copy(), steps.end.copy()
        how = ["cpu range"] * n
    return lo, hi, how


def assign(win_start: np.ndarray, win_end: np.ndarray, index: np.ndarray, phases: list,
           t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray]:
    """(step, phase) of each time `t` (a kernel's start): the window holding it, else null step and
    the outside-steps phase. Windows with start > end (no work) are skipped; overlapping windows are
    cut at the next window's start."""
    step, codes, labels = assign_codes(win_start, win_end, index, phases, t)
    return step, _texts(codes, labels)


def assign_codes(win_start: np.ndarray, win_end: np.ndarray, index: np.ndarray, phases: list,
                 t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray, list]:
    """`assign` with the phase as codes into a list of labels (-1: none), not a text per row."""
    t = np.asarray(t, dtype=np.int64)
    has = np.flatnonzero(win_start <= win_end)
    step = np.zeros(len(t), dtype=np.int64)
    null = np.ones(len(t), dtype=bool)
    codes = np.full(len(t), -1, dtype=np.int64)
    labels = list(phases) + list(OUTSIDE_STEPS)
    if not len(has) or not len(t):
        return pd.arrays.IntegerArray(step, null), codes, labels
    has = has[np.argsort(win_start[has], kind="stable")]
    s, e = win_start[has], win_end[has].copy()
    e[:-1] = np.minimum(e[:-1], s[1:])
    pos = np.searchsorted(s, t, side="right") - 1
    inside = (pos >= 0) & (t <= e[pos.clip(0)])
    # a window ends with its last kernel's end: a kernel starting there is not in it, unless the
    # window is that one zero-length kernel
    inside &= (t < e[pos.clip(0)]) | (s[pos.clip(0)] == e[pos.clip(0)])
    slot = has[pos[inside]]
    step[inside] = index[slot]
    null[inside] = False
    codes[inside] = slot
    out = ~inside
    before, between, after = (len(phases) + OUTSIDE_STEPS.index(p) for p in (BEFORE_FIRST_STEP, BETWEEN_STEPS, AFTER_LAST_STEP))
    codes[out] = np.where(t[out] < s[0], before, np.where(t[out] >= e.max(), after, between))
    return pd.arrays.IntegerArray(step, null), codes, labels


def assign_cpu(steps: Steps, thread: np.ndarray, t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray]:
    """(step, phase) of CPU rows (ops of a CPU-only run, ranges) from the step's CPU range on their
    thread; rows outside every step get null for both (their path still says what it can)."""
    step, codes, labels = assign_cpu_codes(steps, thread, t)
    return step, _texts(codes, labels)


def assign_cpu_codes(steps: Steps, thread: np.ndarray, t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray, list]:
    """`assign_cpu` with the phase as codes into `steps.phase` (-1: none), not a text per row."""
    slot = locate_on_threads(steps.thread, steps.start, steps.end, np.asarray(thread, np.int64), np.asarray(t, np.int64))
    ok = slot >= 0
    step = np.where(ok, steps.index[slot.clip(0)] if len(steps) else 0, 0).astype(np.int64)
    return pd.arrays.IntegerArray(step, ~ok), np.where(ok, slot, -1).astype(np.int64), list(steps.phase)


def _texts(codes: np.ndarray, labels: list) -> np.ndarray:
    """Codes into labels (-1: None) as an object array of the labels themselves."""
    return np.array(list(labels) + [None], dtype=object)[codes] if len(codes) else np.full(0, None, dtype=object)


def attach_windows(steps: Steps, lo: np.ndarray, hi: np.ndarray, how: list, origin: int) -> list:
    """The `meta["steps"]` entries with each step's GPU window (ns from the trace origin) and how it
    was found."""
    out = []
    for e, a, b, h in zip(steps.entries, lo.tolist(), hi.tolist(), how):
        entry = dict(e)
        if a <= b:
            entry.update(gpu_start_ns=a - origin, gpu_end_ns=b - origin, window=h)
        out.append(entry)
    return out


# --- a phase from the step's own work ---------------------------------------------------------------

# Kernels launched with one thread block per token, so their grid.x is the step's token count:
# vLLM's KV-cache writes (`reshape_and_cache[_flash]_kernel`, `concat_and_cache_mla_kernel`,
# csrc/cache_kernels.cu: `dim3 grid(num_tokens)`), RMS norms (`rms_norm_kernel`,
# `fused_add_rms_norm_kernel`, csrc/layernorm_kernels.cu: `dim3 grid(num_tokens)`) and rotary embeddings
# (`rotary_embedding_kernel`, csrc/pos_encoding_kernels.cu: `dim3 grid(num_tokens)`).
PER_TOKEN_KERNEL = re.compile(r"\b(?:reshape_and_cache(?:_flash)?_kernel|concat_and_cache_mla_kernel"
                              r"|(?:fused_add_)?rms_norm_kernel|rotary_embedding_kernel)\b")
# The largest batch vLLM captures a CUDA graph for by default (`max_cudagraph_capture_size`, 512):
# a step with more tokens than this per step is no decode step of a default deployment's graphs.
DECODE_MAX_TOKENS = 512


def infer_phases(steps: Steps, lo: np.ndarray, hi: np.ndarray, gpu_start: np.ndarray, name_codes: np.ndarray,
                 name_table: Sequence, grid_x: np.ndarray, replay: np.ndarray, compute: np.ndarray) -> None:
    """Give a phase to the steps whose marker says none, from their own GPU work (in place: `steps.phase`
    and each entry's `phase_source`, `phase_reason`, `inferred_tokens`, `graph_kernels`, `eager_kernels`).

    Tokens per step T: the median grid.x of the step's per-token kernels (`PER_TOKEN_KERNEL`). A decode
    step schedules one token per running sequence, a prefill step the prompt's tokens, so:
    - with several token levels among the steps: the steps at the smallest T are decode when that T is
      at most `DECODE_MAX_TOKENS`; the steps with more tokens are prefill (a mixed batch looks the same);
    - steps without per-token kernels that only replay CUDA graphs (no eager kernel) are decode: vLLM's
      default `FULL_AND_PIECEWISE` mode captures full graphs for uniform decode batches only;
    - one token level only: decode where the steps replay CUDA graphs, else unknown.
    Under a CUDA graph T is the captured (padded) batch. Steps whose marker has a phase are left alone
    (`phase_source: marker`)."""
    n = len(steps)
    for e in steps.entries:
        e["phase_source"] = "marker" if e.get("phase") is not None else None
    todo = np.array([p is None for p in steps.phase], dtype=bool)
    if not n or not todo.any() or not len(gpu_start):
        return
    _, slot_codes, _ = assign_codes(lo, hi, np.arange(n), list(range(n)), gpu_start)
    slot = np.where(slot_codes < n, slot_codes, -1)  # (codes past n: outside every step)
    name_codes = np.asarray(name_codes, dtype=np.int64)
    per_tok = np.zeros(len(name_table) + 1, dtype=bool)
    for i in np.unique(name_codes[name_codes >= 0]).tolist():
        label = name_table[i]
        per_tok[i] = isinstance(label, str) and bool(PER_TOKEN_KERNEL.search(label))
    gx = np.asarray(grid_x, dtype="float64")
    tok_rows = (slot >= 0) & per_tok[name_codes] & (gx > 0)
    tokens = np.full(n, np.nan)
    if tok_rows.any():
        med = pd.Series(gx[tok_rows]).groupby(slot[tok_rows]).median()
        tokens[med.index.to_numpy()] = med.to_numpy()
    comp = np.asarray(compute, dtype=bool) & (slot >= 0)
    graph = np.bincount(slot[comp & replay], minlength=n)[:n]
    eager = np.bincount(slot[comp & ~np.asarray(replay, dtype=bool)], minlength=n)[:n]
    levels = np.unique(tokens[todo & ~np.isnan(tokens)])
    phase = np.full(n, None, dtype=object)
    reason = np.full(n, None, dtype=object)
    if len(levels) >= 2 and levels[0] <= DECODE_MAX_TOKENS:
        low = todo & (tokens == levels[0])
        high = todo & (tokens > levels[0])
        phase[low], phase[high] = "decode", "prefill"
        reason[low] = (f"{levels[0]:g} token(s) per step (per-token kernels' grid), the run's fewest: one per "
                       "decoding sequence")
        reason[high] = [f"{t:g} tokens per step (per-token kernels' grid), more than the decode steps' "
                        f"{levels[0]:g}: a prefill (or mixed) step" for t in tokens[high].tolist()]
    elif len(levels) == 1:
        same = todo & (tokens == levels[0]) & (graph > 0)
        phase[same] = "decode"
        reason[same] = f"{levels[0]:g} token(s) per step, every step replays CUDA graphs"
    only_graphs = todo & (phase == None) & np.isnan(tokens) & (graph > 0) & (eager == 0)  # noqa: E711
    phase[only_graphs] = "decode"
    reason[only_graphs] = "replays CUDA graphs only (no eager kernel): a full-graph decode step"
    for i in np.flatnonzero(todo).tolist():
        e = steps.entries[i]
        e["graph_kernels"], e["eager_kernels"] = int(graph[i]), int(eager[i])
        if not np.isnan(tokens[i]):
            e["inferred_tokens"] = int(tokens[i])
        if phase[i] is None:
            continue
        steps.phase[i] = phase[i]
        e.update(phase=phase[i], phase_source="inferred", phase_reason=reason[i])
        t = e.get("inferred_tokens")
        if t is None:
            continue
        e.setdefault("new_tokens", t)
        if phase[i] == "decode":  # one token per sequence (a graph's padded batch)
            for k in ("batch", "decode_requests", "decode_tokens"):
                e.setdefault(k, t)
            e.setdefault("prefill_requests", 0)
            e.setdefault("prefill_tokens", 0)
        e["workload_inferred"] = True
