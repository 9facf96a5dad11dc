"""The exact path of the Kineto decode: events as the stdlib decoder gives them (numbers kept as
their text), one at a time. Slow, and taken only by a batch the compiled and typed paths refuse
(`_kineto_events`): values of unexpected types, timestamps a double cannot hold exactly; it gives
the columns they would have given."""
from __future__ import annotations

from collectors.readers._kineto_values import GPU_KINDS, NULL, RUNTIME_CATS, SHAPE_KEYS, WANTED, _ints, int_of, key_of, ns_of, text_of


class ExactBatch:
    """The exact path: events as stdlib dicts with numbers as text, one at a time."""

    def __init__(self, sink: Collector):
        self.sink = sink
        self.cols = {k: {f: [] for f in c.fields} for k, c in
                     (("gpu", sink.gpu), ("rt", sink.rt), ("ops", sink.ops), ("ann", sink.ann), ("gann", sink.gann),
                      ("py", sink.py))}

    def add(self, events: list) -> None:
        sink = self.sink
        names, threads = sink.names, sink.threads
        gpu, rt, ops, ann, gann, py = (self.cols[k] for k in ("gpu", "rt", "ops", "ann", "gann", "py"))
        origin, kept = sink.origin, 0
        for e in events:
            if type(e) is not dict or e.get("ph") != "X":
                continue
            cat = e.get("cat")
            if type(cat) is not str or cat not in WANTED:
                continue
            ts, dur = ns_of(e.get("ts")), ns_of(e.get("dur", 0))
            if ts == NULL:
                sink.untimed += 1
                continue
            args = e.get("args")
            args = args if type(args) is dict else {}
            if cat == "cpu_op":
                ops["ext"].append(int_of(args.get("External id")))
                ops["thread"].append(threads[(key_of(e.get("pid")), key_of(e.get("tid")))])
                ops["name"].append(names[text_of(e.get("name"))])
                dims = args.get("Input Dims")
                if dims is None:
                    ops["shape"].append(NULL)
                else:
                    inputs = tuple(args.get(k) for k in SHAPE_KEYS)
                    key = ("exact", repr(inputs))  # apart from the typed path's raw-text keys
                    sid = sink.shapes.get(key)
                    if sid is None:
                        sid = sink.shapes[key] = len(sink.shapes)
                        sink.shape_inputs.append(inputs)
                    ops["shape"].append(sid)
                cols = ops
            elif cat in RUNTIME_CATS:
                corr = int_of(args.get("correlation"))
                if corr == NULL:  # a runtime call without correlation cannot be joined
                    continue
                rt["corr"].append(corr)
                rt["ext"].append(int_of(args.get("External id")))
                rt["thread"].append(threads[(key_of(e.get("pid")), key_of(e.get("tid")))])
                rt["name"].append(names[text_of(e.get("name"))])
                cols = rt
            elif cat in GPU_KINDS:
                gpu["kind"].append(GPU_KINDS[cat])
                gpu["name"].append(names[text_of(e.get("name"))])
                gpu["device"].append(int_of(args.get("device", e.get("pid"))))
                gpu["stream"].append(int_of(args.get("stream", e.get("tid"))))
                gpu["corr"].append(int_of(args.get("correlation")))
                gpu["ext"].append(int_of(args.get("External id")))
                for prefix, v in (("g", args.get("grid")), ("b", args.get("block"))):
                    ok = type(v) is list and len(v) == 3
                    for i, axis in enumerate("xyz"):
                        gpu[prefix + axis].append(int_of(v[i]) if ok else NULL)
                gpu["regs"].append(int_of(args.get("registers per thread")))
                gpu["smem"].append(int_of(args.get("shared memory")))
                gpu["nbytes"].append(int_of(args.get("bytes")))
                cols = gpu
            elif cat == "user_annotation":
                ann["thread"].append(threads[(key_of(e.get("pid")), key_of(e.get("tid")))])
                ann["name"].append(names[text_of(e.get("name"))])
                ann["ext"].append(int_of(args.get("External id")))
                cols = ann
            elif cat == "python_function":
                if not sink.wanted_frame(e.get("name")):
                    continue
                py["thread"].append(threads[(key_of(e.get("pid")), key_of(e.get("tid")))])
                py["name"].append(names[e.get("name")])
                cols = py
            else:
                gann["device"].append(int_of(e.get("pid")))
                gann["stream"].append(int_of(e.get("tid")))
                gann["name"].append(names[text_of(e.get("name"))])
                gann["ext"].append(int_of(args.get("External id")))
                cols = gann
            cols["ts"].append(ts)
            cols["dur"].append(dur)
            kept += 1
            if origin is None or ts < origin:
                origin = ts
        for k, c in (("gpu", sink.gpu), ("rt", sink.rt), ("ops", sink.ops), ("ann", sink.ann), ("gann", sink.gann),
                     ("py", sink.py)):
            if self.cols[k]["ts"]:
                c.extend({f: _ints(v) for f, v in self.cols[k].items()})
        sink.origin = origin
        sink.events += kept
