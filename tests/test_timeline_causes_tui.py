"""The timeline screen says why each gap happened (the gap line and the gap list's cause column),
on the hand-built step of test_timeline_tui (its largest gap: the host blocked in
cudaStreamSynchronize [40, 230 µs) under aten::item while the GPU ran dry at 42 µs)."""
from __future__ import annotations

from test_timeline_tui import drive, host_trace, screen_text

from tui.screens.timeline import GapListScreen, TimelineScreen


def test_gap_line_and_gap_list_name_the_cause(tmp_path):
    path = host_trace(tmp_path)

    def largest(app):
        assert isinstance(app.screen, TimelineScreen)
        text = " ".join(screen_text(app).split())
        assert "cause: sync in cudaStreamSynchronize" in text
        return True

    def listed(app):
        assert isinstance(app.screen, GapListScreen)
        f = app.screen.frame
        # 200 µs after the sync; the 3 µs and 2 µs gaps (not under the 2 µs floor) end in GEMMs launched
        # at 240 and 5 µs, before their gaps began: queued behind the norm, not waiting on the host
        assert f["cause"].tolist() == ["sync", "queued", "queued"]
        assert f["what"].tolist()[0] == "cudaStreamSynchronize"
        assert "cause" in screen_text(app)
        return True

    assert all(drive(path, [(["7", "right_square_bracket"], largest), (["g"], listed)]))
