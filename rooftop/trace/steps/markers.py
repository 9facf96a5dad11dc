"""Step markers: what a range name says about one engine iteration (source, phase, index, workload), for
every serving stack rooftop knows, hand-written ranges, Python frames and the user's `--steps` pattern."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


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
