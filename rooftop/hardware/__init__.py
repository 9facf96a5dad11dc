"""The hardware a trace ran on: `gpus` (the GPU spec table, datasheet peaks per dtype, identifying a
trace's device and the peaks it is judged against) and `links` (the links a copy crosses). The
tables themselves are data: rooftop/data/gpus.json and links.json."""
