"""Writing a file atomically: a temporary file beside it, then a rename. An interrupted write (an
error, Ctrl-C, SIGTERM turned into an exception) leaves either the old file or the whole new one,
never half of one, and no temporary file behind."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def replace_atomically(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """`write(tmp)` fills a temporary file in `path`'s directory, which then replaces `path`. The
    file gets the user's usual permissions (mkstemp makes 0600; a trace or an export is a normal file)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
