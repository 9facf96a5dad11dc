"""The seal of a stored summary: proof that rooftop, run by this user, wrote the summary for these
exact bytes.

A stored summary (rooftop/present/summary.py) is a cache. Its own checks (code digest, metadata hash, row
count) say whether it is current, but anyone can recompute them: a file whose summary was edited
("MBU 93%"), or whose rows were changed with the old footer copied over, passes them. The seal is
an HMAC-SHA256, keyed with a per-user secret, over the whole file: every data page and the whole
footer (schema, row groups, metadata, the summary), with the seal's own value read as its
placeholder. Without the secret it cannot be made; with it, it holds for one file only. A summary
without a valid seal is never printed: the rows are analysed instead (and the stored numbers
compared with theirs: `rooftop.present.summary.compare`).

The secret is 32 random bytes (hex) in the user's config directory (`$ROOFTOP_CONFIG_DIR`, else
`$XDG_CONFIG_HOME/rooftop`, else `~/.config/rooftop`), file `summary-key`, mode 0600, made on the
first write of a summary. One that another user owns, or that others may read or write, is not
used. A trace from another machine or user is therefore analysed once more; `rooftop summarize
FILE` seals it for this user.

The seal is written after the file is complete: the writer stores `PLACEHOLDER` as the value of
`SEAL_KEY`, then the 64 hex digits replace it in place (the same length: the file's layout stays).
"""
from __future__ import annotations

import hashlib
import hmac
import mmap
import os
import secrets
import stat
from pathlib import Path

SEAL_KEY = b"rooftop.summary.seal"
PLACEHOLDER = b"0" * 64
_CONTEXT = b"rooftop summary seal 1\0"
_KEY_FILE = "summary-key"


def config_dir() -> Path:
    d = os.environ.get("ROOFTOP_CONFIG_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "rooftop"


def _read_key(path: Path) -> bytes | None:
    """The secret at `path`, or None: missing, not a regular file of ours, readable or writable by
    others (a key someone else could know or replace), or not 64 hex digits."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077 or st.st_size != 64:
            return None
        data = os.read(fd, 65)
    finally:
        os.close(fd)
    try:
        return bytes.fromhex(data.decode("ascii")) if len(data) == 64 else None
    except (UnicodeDecodeError, ValueError):
        return None


def user_key(create: bool = False) -> bytes | None:
    """This user's secret; with `create`, made when there is none (atomically: written beside, then
    linked into place, so two writers at once agree on one). None when it cannot be had."""
    d = config_dir()
    path = d / _KEY_FILE
    key = _read_key(path)
    if key is not None or not create:
        return key
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = d / f".{_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: theirs is the key
        finally:
            os.unlink(tmp)
    except OSError:
        return None
    return _read_key(path)


def _file_digest(fh, size: int, value_at: int) -> bytes:
    """sha256 of the file's `size` bytes, the 64 bytes at `value_at` read as the placeholder. Mapped,
    not read: hashlib takes the pages as they are (no copy) and releases the GIL."""
    if not 0 <= value_at <= size - 64:
        raise OSError("the seal lies outside the file")
    h = hashlib.sha256()
    with mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
        h.update(view[:value_at])
        h.update(PLACEHOLDER)
        h.update(view[value_at + 64:])
    return h.digest()


def _mac(key: bytes, digest: bytes) -> bytes:
    return hmac.new(key, _CONTEXT + digest, hashlib.sha256).hexdigest().encode()


def _seal_position(path: str | os.PathLike) -> tuple[int, int, bytes] | None:
    """(file size, offset of the seal's value, the value) from the footer; None without one."""
    from rooftop.trace.footer import read_footer

    footer = read_footer(path)
    if footer is None:
        return None
    at = footer.value_at.get(SEAL_KEY)
    value = footer.metadata.get(SEAL_KEY)
    if at is None or value is None or len(value) != 64:
        return None
    return footer.size, at, value


def seal(path: str | os.PathLike) -> bool:
    """Write the seal of the complete file at `path` over its placeholder; False when it has no
    placeholder or this user has no key (the summary then stays unsealed: never used)."""
    key = user_key(create=True)
    where = _seal_position(path)
    if key is None or where is None:
        return False
    size, at, value = where
    with open(path, "r+b") as fh:
        if os.fstat(fh.fileno()).st_size != size:
            return False
        mac = _mac(key, _file_digest(fh, size, at))
        fh.seek(at)
        fh.write(mac)
    return True


def verify(path: str | os.PathLike, footer) -> bool:
    """Whether the file at `path`, whose footer `footer` was read, carries a valid seal of this
    user's: the HMAC of its bytes as they are now."""
    at = footer.value_at.get(SEAL_KEY)
    value = footer.metadata.get(SEAL_KEY)
    if at is None or value is None or len(value) != 64 or value == PLACEHOLDER:
        return False
    key = user_key()
    if key is None:
        return False
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size != footer.size:
                return False  # changed since the footer was read
            digest = _file_digest(fh, footer.size, at)
    except OSError:
        return False
    return hmac.compare_digest(_mac(key, digest), value)
