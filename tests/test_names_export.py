"""The TUI's CSV export writes whole kernel names, never the display names the table shows."""
from __future__ import annotations

import asyncio

import pandas as pd

from rooftop.trace import write_trace
from tui.app import RooftopApp

LONG = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, cutlass::gemm::"
        "collective::CollectiveMma<cutlass::gemm::MainloopSm120TmaWarpSpecializedBlockScaled<2, 3>, cute::tuple<cute::C<"
        "{m}>, cute::C<128>, cute::C<256> > > > >(cutlass::gemm::kernel::GemmUniversal<int>::Params)")
TRITON = "triton_red_fused__to_copy_add_copy__mean_mul_pow_rsqrt_scaled_fp4_quant_zeros_and_more_fusions_{i}"


def test_export_writes_whole_names(tmp_path, monkeypatch):
    names = [LONG.format(m=128), LONG.format(m=64), TRITON.format(i=5), TRITON.format(i=6)]
    rows = [dict(kind="kernel", name=n, start_ns=1000 * i, dur_ns=100 + i, device=0, stream=7, path="decode/step=0")
            for i, n in enumerate(names)]
    path = write_trace(tmp_path / "t.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}})
    monkeypatch.chdir(tmp_path)

    async def main():
        app = RooftopApp([str(path)])
        async with app.run_test(size=(120, 40)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            for key in ("3", "e"):
                await pilot.press(key)
                await app.workers.wait_for_complete()
                await pilot.pause()
            return list(app.analyses[0].groups()["key"])

    shown = asyncio.run(main())
    assert len(set(shown)) == 4 and any("…" in s for s in shown)  # the table shows cut display names
    frame = pd.read_csv(next(tmp_path.glob("rooftop-kernels-*.csv")))
    assert sorted(frame["kernel"]) == sorted(names)
