"""Load one Kineto trace with Holistic Trace Analysis (run by the HTA venv's python, not ours).

This is what `TraceAnalysis(trace_dir=...)` does on construction: parse, align, filter. The
multiprocessing and memory-profiling options are off: one rank, one process, nothing extra.
"""
import os
import sys

from hta.common.trace import Trace

path = os.path.abspath(sys.argv[1])
t = Trace(trace_files=[path], trace_dir=os.path.dirname(path))
t.load_traces(include_last_profiler_step=True, use_multiprocessing=False, use_memory_profiling=False)
df = t.get_trace(next(iter(t.get_all_traces())))
print(len(df))
