"""The `rooftop` command's arguments: the parser of every subcommand, and what a flag means before
any trace is opened (`--gpu`/`--peaks` as a peak override, `--model` and its shape flags as
analysis options, `--steps` and `--nsys` set for the readers, `--gpu` checked against the table).
Flags are validated here, before a load: a mistyped flag costs no minute-long import."""
from __future__ import annotations

import argparse

from rooftop import __version__

COMMANDS = ("open", "report", "diff", "import", "export", "collect", "predict", "calibrate", "gpus", "summarize")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage + exits 2; keep it to one line
        raise UsageError(message)


def _subparsers(parser: argparse.ArgumentParser):
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("open", help="explore one trace, or compare two, in the terminal UI")
    p.add_argument("traces", nargs="+", metavar="TRACE", help="rooftop Parquet, Kineto JSON, nsys SQLite or .nsys-rep, ncu report/CSV")
    _device_args(p, with_source=False)
    _steps_arg(p)
    _model_args(p)

    p = sub.add_parser("report", help="print the phase table, top kernels and findings")
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--top", type=int, default=10, help="kernel groups to list (default 10)")
    _device_args(p, with_source=True)
    _steps_arg(p)
    _model_args(p)

    p = sub.add_parser("diff", help="compare two traces: a verdict per unit of work, its causes, phase and kernel deltas")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--format", choices=("text", "markdown", "json"), default=None,
                   help="text (default), markdown (a pull-request comment) or json (stable keys)")
    p.add_argument("--fail-above", type=float, default=None, metavar="PCT",
                   help="exit 1 when B is slower than A by more than PCT%% per unit of work and outside noise")
    p.add_argument("--metric", choices=("auto", "decode", "step", "work"), default="auto",
                   help="what --fail-above reads: decode step time, step time, or time per unit of work "
                        "(auto: decode where there are decode steps, else step, else work)")
    p.add_argument("--top", type=int, default=10)
    _device_args(p, with_source=False)
    _steps_arg(p)
    _model_args(p)

    p = sub.add_parser("import", help="convert a Kineto/nsys/ncu trace to a rooftop trace")
    _lazy_args(p, "collectors.readers.import_command")

    p = sub.add_parser("export", help="write a trace for other viewers: --perfetto OUT (Perfetto UI, chrome://tracing)")
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--perfetto", metavar="OUT", required=True,
                   help="Chrome trace JSON (.json or .json.gz) with rooftop's phases, steps and per-step counters")
    _device_args(p, with_source=False)
    _steps_arg(p)
    _model_args(p)

    for name in ("open", "report", "diff", "export"):
        _nsys_arg(sub.choices[name])

    p = sub.add_parser("collect", help="run a built-in model under the profiler and write a trace")
    _lazy_args(p, "collectors.capture.collect")

    p = sub.add_parser("predict", help="write the analytic (roofline) trace of a model on a GPU")
    _lazy_args(p, "collectors.predict")

    p = sub.add_parser("calibrate", help="measure this GPU's achievable bandwidth and GEMM rate")
    _lazy_args(p, "collectors.capture.calibrate")

    sub.add_parser("gpus", help="list the GPU spec table")

    p = sub.add_parser("summarize", help="store the report's numbers in a rooftop trace's footer, so that "
                                         "`report` and the Overview answer at once (import and collect do this)")
    p.add_argument("traces", nargs="+", metavar="TRACE", help="rooftop Parquet trace files (rewritten in place)")
    return sub


_PEAK_SOURCES = ("auto", "datasheet", "measured")


def _peaks_arg(text: str):
    """`--peaks`: a ceiling source (auto, datasheet, measured) or explicit BW_TBps,TFLOPs."""
    if text in _PEAK_SOURCES:
        return text
    from rooftop.hardware.gpus import Override
    try:
        return Override.parse_peaks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; or one of {', '.join(_PEAK_SOURCES)}") from None


def _device_args(p: argparse.ArgumentParser, with_source: bool) -> None:
    p.add_argument("--gpu", metavar="NAME", help="judge against this GPU's datasheet (a key or name from "
                   "`rooftop gpus`), whatever the trace says")
    what = "which ceilings to judge against: auto (measured when calibrated), datasheet, measured, or " \
        if with_source else ""
    p.add_argument("--peaks", type=_peaks_arg, default="auto", metavar="BW_TBps,TFLOPs",
                   help=f"{what}explicit peaks, e.g. 3.35,989 (HBM TB/s, TFLOP/s of the trace's dtype)")


def peak_override(args):
    """The user's --gpu/--peaks as a devices.Override (None when neither was given)."""
    from rooftop.hardware.gpus import Override
    gpu = getattr(args, "gpu", None)
    peaks = getattr(args, "peaks", "auto")
    bw, flops = peaks if isinstance(peaks, tuple) else (None, None)
    return Override(gpu=gpu, bw=bw, flops=flops) if gpu or bw else None


def _model_args(p: argparse.ArgumentParser) -> None:
    """The model-level accounting: what the model is, how it is stored and split, and the workload
    of steps whose metadata does not say (README, "Model MBU")."""
    g = p.add_argument_group("model-level accounting (model MBU/MFU)")
    g.add_argument("--model", metavar="CONFIG", help="a preset name or a Hugging Face config.json")
    g.add_argument("--tp", type=int, default=None, metavar="N", help="tensor-parallel ranks (per-rank shares)")
    g.add_argument("--ep", type=int, default=None, metavar="N", help="expert-parallel ranks (experts per rank = E/N)")
    g.add_argument("--weight-dtype", metavar="DTYPE",
                   help="weights' precision: bf16, fp16, fp32, fp8, mxfp4, nvfp4 (default: from the config)")
    g.add_argument("--kv-dtype", metavar="DTYPE", help="KV cache dtype: bf16, fp16, fp8 (default: the weights' base dtype)")
    g.add_argument("--batch", type=int, metavar="B", help="sequences per step, where the trace does not say")
    g.add_argument("--context", type=int, metavar="C",
                   help="tokens each sequence attends to (its KV cache), where the trace does not say")
    g.add_argument("--new-tokens", type=int, metavar="T", help="tokens a step makes, where the trace does not say")


def model_options(args) -> dict:
    """`analyze` keyword arguments from the model flags: `model` (a ModelSpec or None) and `workload`.

    Raises ConfigError (one line naming the file and the field) for a config that cannot be used."""
    from rooftop.analysis.step_cost import Workload
    from rooftop.llm.config import ConfigError, load_spec

    for name in ("batch", "context", "new_tokens", "tp", "ep"):
        v = getattr(args, name, None)
        if v is not None and (v < 1 if name != "context" else v < 0):
            raise UsageError(f"--{name.replace('_', '-')} must be {'at least 1' if name != 'context' else 'non-negative'}")
    spec = None
    if getattr(args, "model", None):
        spec = load_spec(args.model, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                         tp=args.tp or 1, ep=args.ep or 1)
    elif any(getattr(args, n, None) is not None for n in ("tp", "ep", "weight_dtype", "kv_dtype")):
        raise ConfigError(None, "--tp, --ep, --weight-dtype and --kv-dtype describe a model: pass --model too")
    workload = Workload(batch=getattr(args, "batch", None), context=getattr(args, "context", None),
                        new_tokens=getattr(args, "new_tokens", None))
    return {"model": spec, "workload": workload}


def _steps_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", metavar="REGEX", default=None,
                   help="the range names that mark a step, when rooftop does not know the tool's own: a regular "
                        "expression with optional named groups phase, tokens, step, e.g. "
                        r"'iter(?P<step>\d+)_(?P<phase>prefill|decode)' (read while importing a profiler file)")


def use_steps(pattern: str | None, paths: list[str]) -> None:
    """`--steps`: the step marker of every profiler file read in this process. Steps are found while
    a profiler file is imported (launch records, GPU spans); a rooftop Parquet no longer has those."""
    if pattern is None:
        return
    from rooftop.trace.steps import set_user_pattern
    try:
        set_user_pattern(pattern)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from collectors.open import refuse_steps
    refuse_steps(paths)


def _nsys_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nsys", metavar="PATH", help="the nsys that exports .nsys-rep reports to SQLite "
                   "(default: $NSYS, else nsys on PATH)")


def use_nsys(path: str | None) -> None:
    """`--nsys`: the nsys every .nsys-rep read in this command is exported with."""
    if path is not None:
        from collectors.readers.nsys_rep import use_nsys
        use_nsys(path)


def _lazy_args(p: argparse.ArgumentParser, module: str) -> None:
    """Let a command's own module declare its options, but only when that command is used.

    Importing collectors.capture.collect would import torch; `rooftop report` must not pay for that.
    """
    p.set_defaults(_module=module)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="rooftop", description="A terminal profiler explorer for LLM inference on NVIDIA GPUs. "
                     "`rooftop TRACE [TRACE2]` opens the explorer.")
    parser.add_argument("--version", action="version", version=f"rooftop {__version__}")
    sub = _subparsers(parser)
    if command in ("import", "collect", "predict", "calibrate"):
        p = sub.choices[command]
        module = p.get_default("_module")
        try:
            mod = __import__(module, fromlist=["add_arguments"])
        except ImportError as exc:
            missing = getattr(exc, "name", None) or str(exc)
            raise UsageError(f"`rooftop {command}` needs {missing}: pip install 'rooftop[collect]'") from None
        mod.add_arguments(p)
        if command == "import" and "--steps" not in p._option_string_actions:
            _steps_arg(p)
        if command == "import" and "--nsys" not in p._option_string_actions:
            _nsys_arg(p)
    return parser

def check_gpu(gpu: str | None) -> None:
    """`--gpu KEY` names a row of the spec table (a key or a name `rooftop gpus` lists)."""
    if not gpu:
        return
    from rooftop.hardware.gpus import by_key, match
    if by_key(gpu) is None and match(gpu) is None:
        raise UsageError(f"--gpu {gpu!r}: no such GPU in the spec table (see `rooftop gpus`)")

