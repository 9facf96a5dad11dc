"""collectors.capture.calibrate: the arithmetic (fake timer), the cache, and the no-GPU exit."""
import argparse
import json

import pytest

torch = pytest.importorskip("torch")

from collectors.capture import calibrate  # noqa: E402


class FakeTimer:
    """Runs nothing; returns the given elapsed seconds in turn and counts the calls."""

    def __init__(self, samples):
        self.samples, self.calls = list(samples), 0

    def __call__(self, fn):
        self.calls += 1
        return self.samples.pop(0)


def test_median_bandwidth_and_gemm_rate_by_hand():
    assert calibrate.median_s([3.0, 1.0, 2.0]) == 2.0
    assert calibrate.median_s([4.0, 1.0, 2.0, 3.0]) == 2.5
    # 1 GB copied in 1 ms moves 2 GB (read + write): 2e12 B/s.
    assert calibrate.copy_bandwidth(10**9, [1e-3, 5e-3, 0.5e-3, 1e-3, 9.0]) == pytest.approx(2e12)
    # N=8192: 2*8192^3 = 1.0995e12 FLOPs in 2 ms -> 5.4976e14 FLOP/s.
    assert calibrate.gemm_rate(8192, [2e-3]) == pytest.approx(2 * 8192**3 / 2e-3)
    with pytest.raises(ValueError):
        calibrate.median_s([])


def test_measure_takes_the_median_of_repeats_after_warmup():
    # copy samples then gemm samples; outliers on both sides must not move the median.
    timer = FakeTimer([0.5, 0.001, 0.002, 0.003, 0.0001] + [0.004, 0.008, 0.006, 1.0, 0.006])
    r = calibrate.measure("cpu", bytes=4096, gemm_n=16, repeats=5, warmup=2, timer=timer)
    assert timer.calls == 10
    assert r["bw"] == pytest.approx(2 * 4096 / 0.002)
    assert r["flops"] == pytest.approx(2 * 16**3 / 0.006)
    assert (r["copy_bytes"], r["gemm_n"], r["repeats"], r["dtype"]) == (4096, 16, 5, "bf16")


def test_cache_round_trip_keyed_by_device(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert calibrate.cache_path() == tmp_path / "rooftop" / "calibration.json"
    assert calibrate.load_cached("NVIDIA H200") is None
    calibrate.save({"device": "NVIDIA H200", "bw": 4.1e12, "flops": 7.5e14})
    calibrate.save({"device": "NVIDIA H100 80GB HBM3", "bw": 3.0e12, "flops": 6.5e14})
    assert calibrate.load_cached("NVIDIA H200")["bw"] == 4.1e12
    assert calibrate.load_cached("NVIDIA H100 80GB HBM3")["flops"] == 6.5e14
    assert calibrate.load_cached("CPU (x86_64)") is None
    assert set(json.loads(calibrate.cache_path().read_text())) == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}


def test_broken_cache_is_ignored_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calibrate.cache_path().parent.mkdir(parents=True)
    calibrate.cache_path().write_text("{not json")
    assert calibrate.load_cached("NVIDIA H200") is None
    assert "ignoring unreadable calibration cache" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_run_without_cuda_exits_2_with_one_line(capsys):
    p = argparse.ArgumentParser()
    calibrate.add_arguments(p)
    assert calibrate.run(p.parse_args([])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a CUDA GPU" in err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_measure_on_cuda_is_plausible():
    r = calibrate.measure("cuda", bytes=1 << 28, gemm_n=4096, repeats=5)
    assert 1e11 < r["bw"] < 1e13 and 1e13 < r["flops"] < 5e15
