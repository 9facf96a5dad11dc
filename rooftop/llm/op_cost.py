"""The analytic minimum cost of a framework op, from its input shapes and dtypes.

Pure Python (no torch): the collector, the Kineto importer and the analytic model all use it.
Definitions (docs/definitions.md): a GEMM costs 2·M·N·K FLOPs and moves each operand once plus the output
once; attention costs 4·B·H·Sq·Sk·D FLOPs (halved when causal) and moves Q, K, V and O once.
An op's cost is split across the compute kernels it launched in proportion to their durations,
never onto the memsets/memcpys it also issued (a zero-fill before a GEMM does none of its FLOPs).
Integer GEMMs (`aten::_int_mm`, int8 operands, `imma`/`_s8`/`i8` kernels) do no floating-point
FLOPs: their FLOPs are unknown (None), never 0, while their bytes are still counted.
Copies (`copy_hbm_bytes`): a device-to-device copy of N bytes reads N and writes N bytes of HBM
(2N); a host<->device or peer copy touches N bytes of this GPU's memory once, at a rate set by
PCIe/NVLink, not HBM (`is_link_copy`: the analysis judges it against no HBM roof); a memset of N
bytes writes N.

Shapes and dtypes come as torch.profiler / Kineto record them ("Input Dims", "Input type"):
one list per argument, `[]` for scalars and absent tensors. Anything malformed gives None.
"""
from __future__ import annotations

import math
import re
from typing import Any, Sequence

# Element sizes by the names torch.profiler and Kineto print (`c10::BFloat16`, `float`, ...).
_DTYPE_BYTES = {
    "bfloat16": 2, "bf16": 2, "half": 2, "float16": 2, "fp16": 2,
    "float": 4, "float32": 4, "fp32": 4, "double": 8, "float64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "fp8": 1,
    "signed char": 1, "unsigned char": 1, "int8": 1, "uint8": 1, "bool": 1,
    "short int": 2, "short": 2, "int16": 2, "int": 4, "int32": 4,
    "long int": 8, "long": 8, "int64": 8, "long long int": 8,
    "complexfloat": 8, "complexdouble": 16,
}


_INTEGER_DTYPES = {"signed char", "unsigned char", "int8", "uint8", "short int", "short", "int16", "int",
                   "int32", "long int", "long", "int64", "long long int", "bool"}


def _dtype_key(name: Any) -> str | None:
    if not name or not isinstance(name, str):
        return None
    key = name.strip().lower()
    for prefix in ("c10::", "torch.", "at::"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    return key


def is_integer_dtype(name: Any) -> bool:
    return _dtype_key(name) in _INTEGER_DTYPES


# Integer GEMM kernels by name: cuBLASLt/CUTLASS "imma" and "igemm", torch's _int_mm, and GEMM
# kernels whose operand type is spelled s8/i8/u8/int8 (`..._s8s8_...`, `gemm_i8_...`, `int8_gemm`).
_INT_GEMM = re.compile(
    r"imma|igemm|_int_mm|int8.{0,40}(gemm|matmul)|(gemm|matmul|_mm)\w{0,60}?(int8|(?<![a-z0-9])[su]8|_i8|i8i8|s8s8|u8s8)",
    re.IGNORECASE)


def is_integer_gemm(name: Any) -> bool:
    """Whether a kernel or op name is an integer GEMM (no floating-point FLOPs)."""
    return isinstance(name, str) and bool(_INT_GEMM.search(name))


_DEVICE_COPY = re.compile(r"DtoD|Device -> Device|Device-to-Device|AtoA|AtoD|DtoA", re.IGNORECASE)
_LINK_COPY = re.compile(r"HtoD|DtoH|HtoA|AtoH|HtoH|PtoP|Host|Peer", re.IGNORECASE)


def is_link_copy(name: Any) -> bool:
    """A copy to or from the host or a peer GPU: limited by PCIe/NVLink, not by HBM bandwidth."""
    return isinstance(name, str) and not _DEVICE_COPY.search(name) and bool(_LINK_COPY.search(name))


def copy_hbm_bytes(name: Any, nbytes: float | None) -> float | None:
    """HBM bytes a memcpy/memset of `nbytes` moves: 2N for a device-to-device copy (read + write),
    N for a memset or a host/peer copy (this GPU's side, once). None when N is unknown."""
    if nbytes is None or (isinstance(nbytes, float) and math.isnan(nbytes)) or nbytes < 0:
        return None
    factor = 2.0 if isinstance(name, str) and _DEVICE_COPY.search(name) else 1.0
    return float(nbytes) * factor


def dtype_size(name: str | None) -> int | None:
    """Bytes per element of a dtype name as profilers print it; None when unknown."""
    key = _dtype_key(name)
    return None if key is None else _DTYPE_BYTES.get(key)


def gemm_cost(m: int, n: int, k: int, *, batch: int = 1, a_bytes: float = 2, b_bytes: float = 2,
              out_bytes: float = 2) -> tuple[float, float]:
    """FLOPs 2·M·N·K·batch; bytes: A [M,K] and B [K,N] read once, C [M,N] written once (per batch)."""
    flops = 2.0 * m * n * k * batch
    nbytes = float(batch) * (m * k * a_bytes + k * n * b_bytes + m * n * out_bytes)
    return flops, nbytes


def sdpa_cost(batch: int, heads: int, sq: int, sk: int, head_dim: int, *, kv_heads: int | None = None,
              causal: bool = False, elem_bytes: float = 2, head_dim_v: int | None = None) -> tuple[float, float]:
    """FLOPs of QK^T plus PV, 2·B·H·Sq·Sk·(D + Dv) = 4·B·H·Sq·Sk·D when Dv == D.

    Causal halves the FLOPs only when Sq == Sk (a prefill: half the score square is masked). With
    Sq != Sk (a decode query over the whole cache, or chunked prefill) nothing is halved: a decode
    token attends to every cached key, whatever the causal flag says.
    Bytes: Q and O at `heads`, K and V at `kv_heads`, each moved once (the IO-optimal minimum).
    """
    hk = kv_heads if kv_heads else heads
    dv = head_dim_v if head_dim_v else head_dim
    flops = 2.0 * batch * heads * sq * sk * (head_dim + dv)
    if causal and sq == sk:
        flops /= 2
    elems = batch * (heads * sq * head_dim + hk * sk * head_dim + hk * sk * dv + heads * sq * dv)
    return flops, float(elems * elem_bytes)


# --- op_cost ----------------------------------------------------------------------------------

# SDPA entry points: (layout, index of the causal flag among the arguments), per the aten schemas.
# "bhsd" is [batch, heads, seq, dim] (the public API and the _scaled_dot_product_* backends);
# "bshd" is [batch, seq, heads, dim] (the inner _flash/_efficient forward kernels' wrappers).
_SDPA_OPS = {
    "aten::scaled_dot_product_attention": ("bhsd", 5),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", 4),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6),
    "aten::_scaled_dot_product_attention_math": ("bhsd", 5),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", 5),
    "aten::_flash_attention_forward": ("bshd", 8),
    # custom_mask_type: 0 none, 1 causal from the top left, 2 causal from the bottom right.
    "aten::_efficient_attention_forward": ("bshd", 9),
}


def _dims(shape: Any) -> list[int] | None:
    if not isinstance(shape, (list, tuple)):
        return None
    try:
        out = [int(x) for x in shape]
    except (TypeError, ValueError):
        return None
    return out if all(x >= 0 for x in out) else None


def _arg(seq: Sequence[Any] | None, i: int) -> Any:
    if seq is None or i >= len(seq):
        return None
    return seq[i]


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "1.", "1.0")
    try:
        return bool(value) and not (isinstance(value, float) and math.isnan(value))
    except (TypeError, ValueError):
        return False


def _size(dtypes: Sequence[Any] | None, i: int, fallback: int | None = None) -> int | None:
    size = dtype_size(_arg(dtypes, i))
    return size if size is not None else fallback


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _result(flops: float | None, nbytes: float | None) -> tuple[float | None, float | None]:
    return (None if flops is None else float(flops)), (None if nbytes is None else float(nbytes))


def _gemm(m, n, k, batch, dtypes, ia, ib, extra_bytes=0.0, out_bytes=None):
    a, b = _size(dtypes, ia), _size(dtypes, ib)
    # integer operands: integer MACs, not FP FLOPs; unknown against an FP peak (never 0)
    integer = is_integer_dtype(_arg(dtypes, ia)) or is_integer_dtype(_arg(dtypes, ib))
    if a is None or b is None:
        return _result(None if integer else 2.0 * m * n * k * batch, None)
    flops, nbytes = gemm_cost(m, n, k, batch=batch, a_bytes=a, b_bytes=b, out_bytes=out_bytes or a)
    return _result(None if integer else flops, nbytes + extra_bytes)


def _bias_bytes(shapes, dtypes, i):
    dims = _dims(_arg(shapes, i))
    size = _size(dtypes, i)
    if not dims or size is None:
        return 0.0
    return float(_prod(dims) * size)


def _mm_like(op: str, shapes, dtypes):
    if op in ("aten::mm", "aten::_int_mm"):
        a, b = _dims(_arg(shapes, 0)), _dims(_arg(shapes, 1))
        if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
            return None
        if op == "aten::_int_mm":  # int8 x int8 -> int32: bytes known, FP FLOPs unknown
            a_b, b_b = _size(dtypes, 0, 1), _size(dtypes, 1, 1)
            _, nbytes = gemm_cost(a[0], b[1], a[1], a_bytes=a_b, b_bytes=b_b, out_bytes=4)
            return _result(None, nbytes)
        return _gemm(a[0], b[1], a[1], 1, dtypes, 0, 1)
    if op == "aten::addmm":
        a, b = _dims(_arg(shapes, 1)), _dims(_arg(shapes, 2))
        if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
            return None
        return _gemm(a[0], b[1], a[1], 1, dtypes, 1, 2, _bias_bytes(shapes, dtypes, 0))
    if op in ("aten::bmm", "aten::baddbmm"):
        off = 1 if op == "aten::baddbmm" else 0
        a, b = _dims(_arg(shapes, off)), _dims(_arg(shapes, off + 1))
        if a is None or b is None or len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
            return None
        extra = _bias_bytes(shapes, dtypes, 0) if off else 0.0
        return _gemm(a[1], b[2], a[2], a[0], dtypes, off, off + 1, extra)
    return None


def _matmul(shapes, dtypes):
    a, b = _dims(_arg(shapes, 0)), _dims(_arg(shapes, 1))
    if not a or not b:
        return None
    # torch.matmul's rules: a 1-D operand gets a unit dim, leading dims broadcast.
    a2 = [1] + a if len(a) == 1 else a
    b2 = b + [1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    ba, bb = a2[:-2], b2[:-2]
    width = max(len(ba), len(bb))
    ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
    batch_dims = []
    for x, y in zip(ba, bb):
        if x != y and 1 not in (x, y):
            return None
        batch_dims.append(max(x, y))
    batch = _prod(batch_dims)
    if not bb or _prod(bb) == 1:
        # [..., M, K] @ [K, N]: torch folds the batch into M and reads B once (one mm).
        return _gemm(a2[-2] * _prod(ba), b2[-1], a2[-1], 1, dtypes, 0, 1)
    return _gemm(a2[-2], b2[-1], a2[-1], batch, dtypes, 0, 1)


def _linear(shapes, dtypes):
    x, w = _dims(_arg(shapes, 0)), _dims(_arg(shapes, 1))
    if not x or w is None or len(w) != 2 or x[-1] != w[1]:
        return None
    return _gemm(_prod(x[:-1]), w[0], w[1], 1, dtypes, 0, 1, _bias_bytes(shapes, dtypes, 2))


def _sdpa(op: str, shapes, dtypes, concrete):
    layout, causal_at = _SDPA_OPS[op]
    q, k, v = (_dims(_arg(shapes, i)) for i in range(3))
    if q is None or k is None or v is None or not (len(q) == len(k) == len(v) == 4):
        return None
    if layout == "bshd":  # to [B, H, S, D]
        q, k, v = ([s[0], s[2], s[1], s[3]] for s in (q, k, v))
    b, h, sq, d = q
    hk, sk = k[1], k[2]
    if k[0] != b or v[0] != b or k[3] != d or v[2] != sk or hk <= 0 or h % hk:
        return None
    flag = _arg(concrete, causal_at)
    if op == "aten::_efficient_attention_forward":
        causal = str(flag).strip() in ("1", "2", "1.", "2.")
    else:
        causal = _truthy(flag)
    size = _size(dtypes, 0)
    flops, nbytes = sdpa_cost(b, h, sq, sk, d, kv_heads=hk, causal=causal, elem_bytes=size or 0,
                              head_dim_v=v[3])
    return _result(flops, nbytes if size is not None else None)


def op_cost(op_name: str | None, input_shapes: Sequence[Any] | None, input_dtypes: Sequence[Any] | None = None,
            concrete: Sequence[Any] | None = None) -> tuple[float | None, float | None] | None:
    """(model_flops, model_bytes) of one op call from its recorded inputs; None for ops not modelled.

    Bytes are None when the dtypes are unknown (unknown is null, never a guessed element size);
    FLOPs are None for integer GEMMs (no floating-point work).
    `aten::matmul` and `aten::linear` are wrappers that call mm/addmm/bmm: callers must only cost
    them when they are the op that launched the kernels (their children were not costed too),
    otherwise the FLOPs count twice. SDPA's causal flag is read from `concrete` (the profiler's
    "Concrete Inputs"); without it the call is costed as non-causal.
    """
    if not op_name or not isinstance(input_shapes, (list, tuple)):
        return None
    op = op_name.strip()
    if "::" not in op:
        op = "aten::" + op
    op = op.split(".")[0]  # overload names: aten::mm.out
    try:
        if op in ("aten::mm", "aten::_int_mm", "aten::addmm", "aten::bmm", "aten::baddbmm"):
            return _mm_like(op, input_shapes, input_dtypes)
        if op == "aten::matmul":
            return _matmul(input_shapes, input_dtypes)
        if op == "aten::linear":
            return _linear(input_shapes, input_dtypes)
        if op in _SDPA_OPS:
            return _sdpa(op, input_shapes, input_dtypes, concrete)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return None
    return None


def split_by_duration(total: float | None, durations: Sequence[float | None]) -> list[float | None]:
    """Split an op's total across the compute kernels it launched, in proportion to their durations.

    Callers pass only compute kernels: memsets and memcpys an op issues get none of its cost.
    The parts sum to `total` (the largest part takes the rounding remainder, so none goes negative). Kernels with unknown
    duration get a zero share; when no duration is known the split is equal. Unknown total: all None.
    """
    n = len(durations)
    if n == 0:
        return []
    if total is None or (isinstance(total, float) and math.isnan(total)):
        return [None] * n
    weights = []
    for d in durations:
        try:
            w = float(d) if d is not None else 0.0
        except (TypeError, ValueError):
            w = 0.0
        weights.append(w if w > 0 and not math.isnan(w) else 0.0)
    denom = sum(weights)
    if denom <= 0:
        weights, denom = [1.0] * n, float(n)
    parts = [total * w / denom for w in weights]
    big = max(range(n), key=weights.__getitem__)
    parts[big] = total - sum(p for i, p in enumerate(parts) if i != big)
    return parts
