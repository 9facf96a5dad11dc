"""read_ncu_csv: each header generation and quirk on hand-written samples, and the real fixture."""
from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from collectors.readers.ncu import NcuError
from collectors.readers.ncu_csv import parse_number, read_ncu_csv, unit_factor
from rooftop.trace import to_table


@pytest.fixture
def ncu_fixtures(fixtures_dir) -> Path:
    return fixtures_dir  # tests/conftest.py: skips when absent, fails under ROOFTOP_REQUIRE_FIXTURES=1


def write(tmp_path, text, name="k.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_real_fixture_matches_plain_csv(ncu_fixtures):
    path = ncu_fixtures / "ncu/AveryClapp__ESMM-Research__metrics.csv"
    rows, meta = read_ncu_csv(path)
    # Independent reader: group the long rows by ID with the stdlib.
    ref: dict[str, dict] = {}
    with open(path, newline="") as fh:
        for rec in csv.DictReader(fh):
            k = ref.setdefault(rec["ID"], {"name": rec["Kernel Name"]})
            k[rec["Metric Name"]] = (rec["Metric Unit"], float(rec["Metric Value"].replace(",", "")))
    assert len(rows) == len(ref) == 9
    assert rows["name"].tolist() == [k["name"] for k in ref.values()]
    for i, k in enumerate(ref.values()):
        unit, dur = k["gpu__time_duration.sum"]
        assert unit == "nsecond" and rows["dur_ns"].iloc[i] == dur
        assert rows["dram_read"].iloc[i] == k["dram__bytes.sum"][1]  # total only: stored as read
        assert rows["dram_write"].iloc[i] == 0.0
        flops = 2 * k["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"][1] \
            + k["sm__sass_thread_inst_executed_op_fadd_pred_on.sum"][1] \
            + k["sm__sass_thread_inst_executed_op_fmul_pred_on.sum"][1]
        assert rows["flops"].iloc[i] == flops
    # first kernel, by hand: 2 x 1,073,741,824 + 0 + 1,048,576
    assert rows["flops"].iloc[0] == 2_148_532_224
    assert rows["dur_ns"].iloc[0] == 10_776_576 and rows["dram_read"].iloc[0] == 32_746_880
    assert rows["grid"].iloc[7] == [8, 16, 5] and rows["block"].iloc[7] == [128, 1, 1]
    assert rows["stream"].iloc[0] == 7 and rows["device"].iloc[0] == 0
    assert meta["device"]["cc"] == "8.6" and meta["source"]["format"] == "csv-details"
    assert rows["path"].isna().all()
    assert any("dram__bytes.sum" in w for w in meta["warnings"])


NEW_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value",'
              '"Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"')


def new_row(i, name, metric, unit, value, section="Command line profiler metrics"):
    return (f'"{i}","4242","python3","host","{name}","1","7","(128, 1, 1)","(264, 1, 1)","0","9.0",'
            f'"{section}","{metric}","{unit}","{value}","","","","",""')


def test_details_new_header_with_noise_units_and_quotes(tmp_path):
    name = 'void gemv<float, 128>(Params<""a,b"">, int)'  # commas and doubled quotes inside
    lines = [
        "loading model...",
        "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
        '==PROF== Profiling "gemv" - 0: 0%....50%....100% - 38 passes',
        "app says: hello, world",
        NEW_HEADER,
        new_row(0, name, "gpu__time_duration.sum", "usecond", "12.50"),
        new_row(0, name, "dram__bytes_read.sum", "Mbyte", "10.24"),
        new_row(0, name, "dram__bytes_write.sum", "Kbyte", "1,024.50"),
        new_row(0, name, "lts__t_sector_hit_rate.pct", "", "n/a"),
        new_row(0, name, "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "inst", "3.25"),
        new_row(0, name, "launch__func_cache_config", "", "CachePreferNone"),
        new_row(0, name, "Achieved Occupancy", "%", "41.5", section="Occupancy"),
        new_row(0, name, "Memory Throughput", "Gbyte/second", "812.3", section="Memory Workload Analysis"),
        '"0","4242","python3","host","x","1","7","(128, 1, 1)","(264, 1, 1)","0","9.0","SOL","","","",'
        '"SOLBottleneck","WRN","This kernel, in words","global","12.5"',
        "==PROF== Disconnected from process 4242",
        new_row(1, "flash_fwd_kernel", "gpu__time_duration.sum", "msecond", "1.5"),
        new_row(1, "flash_fwd_kernel", "dram__bytes_read.sum", "Gbyte", "2"),
    ]
    rows, meta = read_ncu_csv(write(tmp_path, "\n".join(lines) + "\n"))
    assert len(rows) == 2
    assert rows["name"].iloc[0] == 'void gemv<float, 128>(Params<"a,b">, int)'
    assert rows["dur_ns"].tolist() == [12_500, 1_500_000]
    assert rows["dram_read"].tolist() == [10_240_000.0, 2e9]
    assert rows["dram_write"].iloc[0] == 1_024_500.0 and rows["dram_write"].isna().iloc[1]
    assert rows["l2_hit_pct"].isna().all()
    assert rows["stall_long_scoreboard"].iloc[0] == 3.25 and rows["stall_wait"].isna().all()
    assert rows["occupancy_pct"].iloc[0] == 41.5
    assert rows["grid"].iloc[0] == [264, 1, 1] and rows["block"].iloc[1] == [128, 1, 1]
    assert meta["device"]["cc"] == "9.0"
    to_table(rows)  # conforms to the schema


def test_details_old_header_with_kernel_time(tmp_path):
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
              '"Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description"')
    def row(i, label, unit, value, section="GPU Speed Of Light Throughput"):
        return (f'"{i}","77","python","h","softmax_kernel","2023-May-09 15:23:06","1","7","{section}",'
                f'"{label}","{unit}","{value}","","",""')
    lines = [header,
             row(0, "Duration", "usecond", "1,234.5"),
             row(0, "DRAM Throughput", "%", "71.2"),
             row(0, "Memory Throughput", "%", "80.0"),  # SOL memory %, not DRAM: not mapped
             row(0, "Registers Per Thread", "register/thread", "32", "Launch Statistics"),
             row(0, "Block Size", "", "256", "Launch Statistics"),
             '"0","77","python","h","softmax_kernel","2023-May-09 15:23:06","1","7","LaunchStats","","","",'
             '"LaunchConfiguration","WRN","A long, quoted ""rule"" text"']
    rows, _ = read_ncu_csv(write(tmp_path, "\n".join(lines)))
    assert len(rows) == 1
    assert rows["dur_ns"].iloc[0] == 1_234_500
    assert rows["dram_pct"].iloc[0] == pytest.approx(71.2)
    assert rows["registers"].iloc[0] == 32
    assert rows["grid"].iloc[0] is None  # no Grid Size column in this generation
    assert rows["dram_read"].isna().all()


def test_raw_page_with_units_row(tmp_path):
    lines = [
        "==PROF== Connected to process 1",
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum",'
        '"device__attribute_display_name","launch__grid_dim_x","launch__grid_dim_y","launch__grid_dim_z",'
        '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"',
        '"","","","","","","","","","","","Gbyte","Mbyte","msecond","","","","","inst","inst"',
        '"0","9","python","h","ampere_bf16_s16816gemm","1","7","(256, 1, 1)","(8, 4, 2)","0","9.0",'
        '"1.50","n/a","2.25","NVIDIA H200","16","8","1","0.75","1,000"',
        '"1","9","python","h","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",'
        '"1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","0","0.001","0.003","NVIDIA H200","1","1","1","n/a","0"',
    ]
    rows, meta = read_ncu_csv(write(tmp_path, "\n".join(lines)))
    assert meta["source"]["format"] == "csv-raw"
    assert meta["device"]["name"] == "NVIDIA H200"
    assert rows["dram_read"].tolist() == [1.5e9, 0.0]  # 0 is a measured 0, not unknown
    assert rows["dram_write"].isna().iloc[0] and rows["dram_write"].iloc[1] == 1000.0
    assert rows["dur_ns"].tolist() == [2_250_000, 3_000]
    assert rows["grid"].iloc[0] == [16, 8, 1]  # the metric wins over the "Grid Size" text
    assert rows["stall_wait"].iloc[0] == 0.75 and rows["stall_wait"].isna().iloc[1]
    assert rows["flops"].tolist() == [2000.0, 0.0]


@pytest.mark.parametrize("text,value", [
    ("1,073,741,824", 1073741824.0), ("11.47", 11.47), ("2.508.800", 2508800.0), ("9,00", 9.0),
    ("1,234", 1234.0), ("1.234,5", 1234.5), ("0.001", 0.001), ("1.500", 1.5), ("n/a", None), ("", None), ("-3.5", -3.5), ("cudaFuncCachePreferNone", "cudaFuncCachePreferNone"),
])
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("unit,factor,cls", [
    ("byte", 1, "bytes"), ("Kbyte", 1e3, "bytes"), ("Mbyte", 1e6, "bytes"), ("Gbyte", 1e9, "bytes"),
    ("Kibyte", 1024, "bytes"), ("nsecond", 1, "time"), ("usecond", 1e3, "time"), ("msecond", 1e6, "time"),
    ("second", 1e9, "time"), ("%", 1, "%"), ("inst", 1, None), ("Ghz", 1e9, "hz"),
    ("Gbyte/second", 1e9, "rate"), ("cycle/nsecond", 1e9, "rate"), ("byte/block", 1, "bytes"), ("", 1, None),
])
def test_unit_factor(unit, factor, cls):
    f, c = unit_factor(unit)
    assert f == pytest.approx(factor) and c == cls


def test_errors_are_one_line(tmp_path):
    with pytest.raises(NcuError, match="no ncu CSV header"):
        read_ncu_csv(write(tmp_path, "==PROF== Connected\nhello\n"))
    with pytest.raises(NcuError, match="no kernel rows"):
        read_ncu_csv(write(tmp_path, NEW_HEADER + "\n==PROF== Disconnected\n"))
    with pytest.raises(NcuError, match="binary"):
        p = tmp_path / "b.csv"
        p.write_bytes(b"\0\1\2ID Kernel Name")
        read_ncu_csv(p)
    with pytest.raises(NcuError, match="no such file") as exc:
        read_ncu_csv(tmp_path / "nope.csv")
    assert "\n" not in str(exc.value)


# --- every layout ncu writes, generated here --------------------------------------------------

IDENT = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Device", "CC"]
RULES = ["Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]
# (kernel, metric, unit, value as ncu prints it, value in base units)
KERNELS = {
    0: ("void gemv<__nv_bfloat16, 4>(Params, int)", {
        "gpu__time_duration.sum": ("usecond", "1,250.50", 1_250_500),
        "dram__bytes_read.sum": ("Mbyte", "4.74", 4.74e6),
        "dram__bytes_write.sum": ("byte", "1,024", 1024.0),
        "sm__cycles_elapsed.avg": ("cycle", "2,501,000", 2_501_000.0),
        "sm__cycles_elapsed.avg.per_second": ("Ghz", "2.00", 2.0e9)}),
    1: ('flash_fwd_kernel<Traits<128, 64>, "x,y">', {
        "gpu__time_duration.sum": ("nsecond", "10,340", 10_340),
        "dram__bytes_read.sum": ("Kbyte", "512", 512e3),
        "dram__bytes_write.sum": ("byte", "0", 0.0),
        "sm__cycles_elapsed.avg": ("cycle", "20,680", 20_680.0),
        "sm__cycles_elapsed.avg.per_second": ("Ghz", "2.00", 2.0e9)}),
}


def _q(cells):
    return ",".join('"' + str(c).replace('"', '""') + '"' for c in cells)


def _ident(i, name):
    return [str(i), "4242", "python3.12", "127.0.0.1", name, "1", "7", "(128, 1, 1)", "(1, 8, 10)", "0", "12.0"]


def details_csv(rules: bool, trailing_comma: bool, drop=(), prof=True, sections=True) -> str:
    """`ncu --csv --page details`: one row per metric. With the rule columns, ncu ends each metric
    row right after its value with a comma (what the RTX 5090 exports look like)."""
    header = IDENT + ["Section Name", "Metric Name", "Metric Unit", "Metric Value"] + (RULES if rules else [])
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3.12)"] if prof else []
    lines.append(_q(header))
    for i, (name, metrics) in KERNELS.items():
        if prof:
            lines.append(f'==PROF== Profiling "kernel" - {i}: 0%....50%....100% - 9 passes')
        for metric, (unit, text, _) in metrics.items():
            if metric in drop:
                continue
            section = "Command line profiler metrics" if sections else ""
            row = _q(_ident(i, name) + [section, metric, unit, text])
            if rules and not trailing_comma:
                row += "," + _q([""] * len(RULES))
            elif trailing_comma:
                row += ","
            lines.append(row)
        if rules:  # a rule row: empty metric cells, rule text with commas
            lines.append(_q(_ident(i, name) + ["SpeedOfLight", "", "", "", "SOLBottleneck", "OPT",
                                               "This grid is too small, resulting in 0.5 waves.", "", ""]))
    lines.append("==PROF== Disconnected from process 4242")
    return "\n".join(lines) + "\n"


def raw_csv(units_row: bool, trailing_comma: bool, drop=()) -> str:
    """`ncu --csv --page raw`: one row per kernel, one column per metric, a units row first."""
    metrics = [m for m in KERNELS[0][1] if m not in drop]
    end = "," if trailing_comma else ""
    lines = ["==PROF== Connected to process 4242", _q(IDENT + metrics) + end]
    # one unit per column (ncu scales a column, not a cell); without the units row, base units
    units = {m: (RAW_UNITS[m] if units_row else ("", 1.0)) for m in metrics}
    if units_row:
        lines.append(_q([""] * len(IDENT) + [units[m][0] for m in metrics]) + end)
    for i, (name, ms) in KERNELS.items():
        lines.append(_q(_ident(i, name) + [f"{ms[m][2] / units[m][1]:,.4f}".rstrip("0").rstrip(".") for m in metrics]) + end)
    return "\n".join(lines) + "\n"


RAW_UNITS = {"gpu__time_duration.sum": ("usecond", 1e3), "dram__bytes_read.sum": ("Kbyte", 1e3),
             "dram__bytes_write.sum": ("byte", 1.0), "sm__cycles_elapsed.avg": ("cycle", 1.0),
             "sm__cycles_elapsed.avg.per_second": ("Ghz", 1e9)}


def _expected(drop=()):
    out = []
    for i, (name, ms) in KERNELS.items():
        dur = ms["gpu__time_duration.sum"][2] if "gpu__time_duration.sum" not in drop else \
            ms["sm__cycles_elapsed.avg"][2] / ms["sm__cycles_elapsed.avg.per_second"][2] * 1e9
        out.append((name, round(dur), ms["dram__bytes_read.sum"][2], ms["dram__bytes_write.sum"][2]))
    return out


def _check(rows, drop=()):
    got = list(zip(rows["name"], rows["dur_ns"].astype(int), rows["dram_read"], rows["dram_write"]))
    exp = _expected(drop)
    assert [g[0] for g in got] == [e[0] for e in exp]
    for g, e in zip(got, exp):
        assert g[1] == e[1] and g[2] == pytest.approx(e[2]) and g[3] == pytest.approx(e[3])


@pytest.mark.parametrize("rules,trailing", [(False, False), (True, False), (True, True), (False, True)])
@pytest.mark.parametrize("prof,sections", [(True, True), (False, False)])
def test_details_layouts(tmp_path, rules, trailing, prof, sections):
    rows, meta = read_ncu_csv(write(tmp_path, details_csv(rules, trailing, prof=prof, sections=sections)))
    assert len(rows) == 2 and meta["source"]["format"] == "csv-details"
    _check(rows)
    assert meta["source"]["duration"] == "measured"
    assert not any("unreadable" in w for w in meta["warnings"])
    assert meta["device"]["cc"] == "12.0"


@pytest.mark.parametrize("units_row", [True, False])
@pytest.mark.parametrize("trailing", [False, True])
def test_raw_layouts(tmp_path, units_row, trailing):
    rows, meta = read_ncu_csv(write(tmp_path, raw_csv(units_row, trailing)))
    assert meta["source"]["format"] == "csv-raw" and len(rows) == 2
    _check(rows)
    assert not any("unreadable" in w for w in meta["warnings"])


@pytest.mark.parametrize("layout", ["details", "raw"])
def test_duration_derived_from_cycles(tmp_path, layout):
    drop = ("gpu__time_duration.sum",)
    text = details_csv(True, True, drop=drop) if layout == "details" else raw_csv(True, False, drop=drop)
    rows, meta = read_ncu_csv(write(tmp_path, text))
    _check(rows, drop)
    # by hand: 2,501,000 cycles at 2.00 GHz = 1,250,500 ns; 20,680 at 2 GHz = 10,340 ns
    assert rows["dur_ns"].tolist() == [1_250_500, 10_340]
    assert meta["source"]["duration"] == "derived"
    assert any("derived from sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second" in w for w in meta["warnings"])


def test_unreadable_rows_counted_with_an_example(tmp_path):
    text = details_csv(True, True).splitlines()
    text.insert(3, "Epoch 1: loss 0.25")  # the app printing among the rows
    text.insert(5, '"0","4242","cut short"')
    rows, meta = read_ncu_csv(write(tmp_path, "\n".join(text)))
    _check(rows)
    warn = [w for w in meta["warnings"] if "unreadable" in w]
    assert len(warn) == 1 and warn[0].startswith("2 unreadable CSV line(s) skipped, e.g. ")
    assert "'Epoch 1: loss 0.25'" in warn[0]


def _fixture_reference(path):
    """Kernels and metrics of a details CSV, read with the stdlib only."""
    with open(path, newline="") as fh:
        recs = list(csv.reader(fh))
    header, body = recs[0], recs[1:]
    col = {h: i for i, h in enumerate(header)}
    kernels: dict[str, dict] = {}
    for r in body:
        k = kernels.setdefault(r[col["ID"]], {"name": r[col["Kernel Name"]], "cc": r[col["CC"]]})
        if r[col["Metric Name"]]:
            k[r[col["Metric Name"]]] = (r[col["Metric Unit"]], r[col["Metric Value"]])
    return kernels


@pytest.mark.parametrize("kernel", ["0001_67bdb7e29d1bb4e0ca0aec954ef18af3", "0013_178ff748c21ea29399b8568af3cd1f02"])
def test_rtx5090_details_fixtures(ncu_fixtures, kernel):
    path = ncu_fixtures / f"ncu/CodeGandee__llm-perf-opt__reports__20251107-dsocr__ncu-v2__kernel_{kernel}__ncu.details.csv"
    rows, meta = read_ncu_csv(path)
    ref = _fixture_reference(path)
    assert len(rows) == len(ref) == 1
    k = next(iter(ref.values()))
    assert rows["name"].iloc[0] == k["name"]
    unit, value = k["gpu__time_duration.sum"]
    assert unit == "us" and rows["dur_ns"].iloc[0] == round(float(value) * 1e3)
    unit, value = k["dram__bytes_read.sum"]
    assert unit == "Mbyte" and rows["dram_read"].iloc[0] == pytest.approx(float(value) * 1e6)
    assert rows["dram_pct"].iloc[0] == pytest.approx(float(k["dram__throughput.avg.pct_of_peak_sustained_elapsed"][1]))
    assert meta["device"]["cc"] == k["cc"] == "12.0"
    assert not any("unreadable" in w for w in meta["warnings"])
    # FLOPs only where a CUDA-core counter or a non-zero tensor count exists (the GEMV has neither)
    metrics = {n: v[1] for n, v in k.items() if isinstance(v, tuple)}
    cores = [n for n, v in metrics.items() if "sass_thread_inst_executed_op_f" in n and v not in ("", "n/a")]
    tensor = [float(v.replace(",", "")) for n, v in metrics.items() if n.startswith("sm__ops_path_tensor_src_")
              and v not in ("", "n/a")]
    if not cores and not any(tensor):
        assert pd.isna(rows["flops"].iloc[0])
    # bandwidth the counters imply: bytes / time / DRAM %, by hand from the file's own numbers
    read = float(k["dram__bytes_read.sum"][1]) * 1e6
    implied = read / (float(k["gpu__time_duration.sum"][1]) * 1e-6) / (float(k["dram__throughput.avg.pct_of_peak_sustained_elapsed"][1]) / 100)
    assert meta["device"]["peaks"]["ncu"]["bw_from_throughput"] == pytest.approx(implied, rel=0.01)


@pytest.mark.parametrize("encoding,newline", [("utf-8-sig", "\r\n"), ("utf-16", "\r\n"), ("utf-8", "\n")])
def test_windows_encodings_and_line_ends(tmp_path, encoding, newline):
    p = tmp_path / "k.csv"
    p.write_bytes(details_csv(True, True).replace("\n", newline).encode(encoding))
    rows, meta = read_ncu_csv(p)
    _check(rows)
    assert not any("unreadable" in w for w in meta["warnings"])


def test_utf16_csv_is_detected_and_loaded(tmp_path):
    from collectors.open import open_trace
    from collectors.readers.importers import detect
    p = tmp_path / "out.txt"
    p.write_bytes(details_csv(True, True).encode("utf-16"))
    assert detect(p) == "ncu-csv"
    assert len(open_trace(p).events) == 2
