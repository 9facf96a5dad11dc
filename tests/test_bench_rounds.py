"""bench/import_bench.py --rounds: each pair's ratio, unfinished pairs left out."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import import_bench  # noqa: E402


def test_rounds_table_takes_the_ratio_of_each_pair_and_skips_a_pair_that_did_not_finish():
    rows = [{"kernels": 1000, "rounds": [
        {"rooftop_2_s": 2.0, "floor_s": 1.0}, {"rooftop_2_s": 6.0, "floor_s": 2.0},
        {"rooftop_2_s": 1.0, "floor_s": None},  # the floor did not finish: no pair
        {"rooftop_2_s": 2.0, "floor_s": 0.5}]}, {"kernels": 10, "rounds": []}]
    lines = import_bench.rounds_table(rows).splitlines()
    assert len(lines) == 3  # header, rule, one size (the other has no pair)
    # medians of each column (2.0 of 2, 2, 6; 1.0 of 0.5, 1, 2), ratios per pair 2, 3, 4: not 2.0 / 1.0
    assert lines[2] == "| 1,000 | 3 | 2.00; 2.00-6.00 | 1.00; 0.50-2.00 | 2.00x / 3.00x / 4.00x |"
