"""Issue 37 item 3: kernels replayed from a CUDA graph take the layer they were captured in.

nsys (`--cuda-graph-trace=node`) records each graph node's creation in CUDA_GRAPH_NODE_EVENTS; an
instantiated graph's nodes are clones (`originalGraphNodeId`) of the captured ones, and a replayed
kernel carries its executable node's id. A synthetic export whose capture happened inside NVTX layer
ranges checks that each replayed kernel's path is its step's and then its capture-time layer's, on
both readers (ADBC and sqlite3), and that the layer reaches the analysis as the trace's own."""
from __future__ import annotations

import importlib.util
import sqlite3

import pytest

from collectors.readers import nsys
from collectors.open import open_trace

HAVE_ADBC = importlib.util.find_spec("adbc_driver_sqlite") is not None
T = 7  # the one host thread
PUSH_POP = 59


def _export(path, nodes: bool = True):
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            correlationId INT, demangledName INT, shortName INT, graphNodeId INT, graphId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, globalTid INT);
        CREATE TABLE CUDA_GRAPH_NODE_EVENTS (start INT, end INT, graphNodeId INT, originalGraphNodeId INT,
            globalTid INT, nameId INT);
    """)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "gemv_kernel"), (2, "rms_norm_kernel"),
                                                             (3, "cudaGraphLaunch_v10000"), (4, "cudaLaunchKernel_v7000"),
                                                             (5, "argmax_kernel")])
    ranges = [(100, 300, "capture_graph"), (105, 295, "model"), (110, 190, "layers.0"), (200, 290, "layers.1"),
              (1000, 1900, "decode_step_0"), (2000, 2900, "decode_step_1")]
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, NULL, ?)",
                    [(s, e, PUSH_POP, t, T) for s, e, t in ranges])
    if nodes:
        # captured nodes 1-4 inside the layer ranges; the executable graph's clones 11-14 at instantiation
        created = [(120, 1, None), (150, 2, None), (210, 3, None), (250, 4, None)]
        created += [(400, 10 + n, n) for n in (1, 2, 3, 4)]
        con.executemany("INSERT INTO CUDA_GRAPH_NODE_EVENTS VALUES (?, ?, ?, ?, ?, 0)",
                        [(t, t + 1, node, orig, T) for t, node, orig in created])
    kernels, calls = [], []
    for step, base in enumerate((1000, 2000)):
        corr = 10 + step
        calls.append((base + 10, base + 20, T, corr, 3))  # one cudaGraphLaunch per step
        for j, (node, name) in enumerate(((11, 2), (12, 1), (13, 2), (14, 1))):
            kernels.append((base + 100 + 100 * j, base + 150 + 100 * j, 0, 7, corr, name, name, node, 1))
        calls.append((base + 600, base + 610, T, 100 + step, 4))  # an eager kernel after the replay
        kernels.append((base + 700, base + 750, 0, 7, 100 + step, 5, 5, None, None))
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?)", calls)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", kernels)
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("fast", [True, False])
def test_replayed_kernels_take_their_capture_time_layer(tmp_path, monkeypatch, fast):
    if fast and not HAVE_ADBC:
        pytest.skip("adbc-driver-sqlite not installed")
    if not fast:
        monkeypatch.setattr(nsys, "open_fast", lambda p: None)
    rows, _ = nsys.read_nsys(_export(tmp_path / "graphs.sqlite"))
    k = rows[rows["kind"] == "kernel"].sort_values("start_ns")
    paths = k["path"].astype(str).tolist()
    layer0, layer1 = "capture_graph/model/layers.0", "capture_graph/model/layers.1"
    # per step: the four replayed kernels (two captured in each layer), then the eager one (no node)
    assert paths == sum(([f"decode_step_{s}/{layer0}"] * 2 + [f"decode_step_{s}/{layer1}"] * 2
                         + [f"decode_step_{s}"] for s in (0, 1)), [])


def test_the_analysis_sees_every_layer_and_the_step(tmp_path):
    t = open_trace(_export(tmp_path / "graphs.sqlite"))
    k = t.events[t.events["kind"] == "kernel"].sort_values("start_ns")
    replayed = k[k["name"].astype(str) != "argmax_kernel"]
    assert replayed["layer"].tolist() == [0, 0, 1, 1, 0, 0, 1, 1]
    assert replayed["step"].tolist() == [0] * 4 + [1] * 4 and set(replayed["phase"].astype(str)) == {"decode"}
    eager = k[k["name"].astype(str) == "argmax_kernel"]
    assert eager["layer"].isna().all() and eager["step"].tolist() == [0, 1]


def test_without_node_records_the_launch_path_stays(tmp_path):
    rows, _ = nsys.read_nsys(_export(tmp_path / "plain.sqlite", nodes=False))
    k = rows[rows["kind"] == "kernel"]
    assert set(k["path"].astype(str)) == {"decode_step_0", "decode_step_1"}
