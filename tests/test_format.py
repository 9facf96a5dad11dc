"""Numbers as people read them: SI prefixes both ways, never `0` for a non-zero value, never an exponent."""
from rooftop.present.format import fmt_bytes, fmt_count, fmt_flops, fmt_ns, fmt_num, fmt_pct, fmt_rate


def test_tiny_values_get_sub_unit_prefixes():
    assert fmt_rate(7.97e-05, "FLOP/s") == "79.7 µFLOP/s"  # a CPU op's TFLOP/s-scale rate
    assert fmt_rate(0.5) == "500 mB/s"
    assert fmt_bytes(0.25) == "250 mB"
    assert fmt_flops(0.002) == "2 m"
    assert fmt_ns(0.5) == "500 ps"
    assert fmt_num(7.97e-05) == "79.7 µ" and fmt_num(0.0123) == "0.0123"
    assert fmt_pct(1e-5) == "0.001%" and fmt_pct(1e-9) == "<0.0001%"


def test_zero_big_and_unknown():
    assert fmt_ns(0) == "0 ns" and fmt_bytes(0) == "0 B"  # a true zero stays zero
    assert fmt_num(2.5e9) == "2.5 G" and fmt_num(12.5) == "12.5" and fmt_num(42) == "42"
    assert fmt_ns(1_500_000) == "1.5 ms" and fmt_rate(3.35e12) == "3.35 TB/s"
    assert fmt_num(None) == fmt_rate(float("nan")) == "—"


def test_no_exponent_anywhere():
    for v in (7.97e-05, 3e-9, 1.2e-13, 1200.5, 4.5e7, 1.23456789e8):
        for f in (fmt_num, fmt_ns, fmt_bytes, fmt_flops, fmt_rate, fmt_pct):
            assert "e-" not in f(v) and "e+" not in f(v), (f.__name__, v, f(v))


def test_fmt_count_agrees_in_number():
    assert fmt_count(1, "row") == "1 row" and fmt_count(0, "gap") == "0 gaps"
    assert fmt_count(1471, "row") == "1,471 rows" and fmt_count(2, "copy", "copies") == "2 copies"


def test_tera_rates_below_the_tera_range_carry_their_own_unit():
    """A CPU run's 0.000529 TFLOP/s is `529 MFLOP/s`, never `529 µ TFLOP/s` (issue 40)."""
    from rooftop.present.format import fmt_tera
    assert fmt_tera(0.000529, "TFLOP/s") == "529 MFLOP/s"
    assert fmt_tera(8.37e-05, "TB/s") == "83.7 MB/s"
    assert fmt_tera(1.234, "TFLOP/s") == "1.23" and fmt_tera(0.05, "TB/s") == "0.05"
    assert fmt_tera(None, "TB/s") == "—" and fmt_tera(0, "TB/s") == "0"
    assert "µ" not in fmt_tera(3e-9, "TFLOP/s")  # 3 kFLOP/s
