"""What rooftop can open: the checks on an input path made before anything is opened, and the
Parquet sniff."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from rooftop.trace.schema import TraceError


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_input(path: str | os.PathLike, allow_dir: bool = True) -> os.stat_result:
    """The `stat` of an input, or the one-line error for what rooftop cannot read: missing,
    permission denied, a FIFO, a device, a socket (checked before any open: opening a FIFO blocks
    until a writer comes), a /proc or /sys pseudo-file, a directory where a file is expected."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise TraceError(path, "no such file or directory") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    for test, what in _KINDS:
        if test(st.st_mode):
            raise TraceError(path, f"not a regular file: {what}", "give a trace file or a run directory")
    if stat.S_ISDIR(st.st_mode):
        if not allow_dir:
            raise TraceError(path, "is a directory", "give a trace file")
        if not os.access(path, os.R_OK | os.X_OK):  # its files can be neither listed nor opened
            raise TraceError(path, "permission denied")
        return st
    resolved = str(path.resolve())
    if resolved.startswith(("/proc/", "/sys/")):  # (/dev/shm holds real files: devices are caught above)
        raise TraceError(path, "not a trace file: a /proc or /sys pseudo-file")
    if not os.access(path, os.R_OK):
        raise TraceError(path, "permission denied")
    return st


def is_parquet(path: str | os.PathLike) -> bool:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # never open a FIFO or a device to sniff it
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False
