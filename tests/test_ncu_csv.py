"""read_ncu_csv: each header generation and quirk on hand-written samples, and the real fixture."""
from __future__ import annotations

import csv
from pathlib import Path

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
