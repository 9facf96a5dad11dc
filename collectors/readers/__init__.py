"""Readers of trace files users already have: Kineto JSON, Nsight Systems SQLite, Nsight Compute.

Nothing here imports torch: the TUI opens files through `collectors.readers.importers` alone.
"""
