"""Writing completed incoming transfers to the agent's ``--out-dir``.

A name comes from the peer, so it is checked before it touches the file system: a plain file
name only (no directory part, no ``..``, no NUL, at most 255 bytes), which keeps every write
inside the directory. Files are written under a temporary name and renamed into place, so a
reader of the directory sees either nothing or the whole file, never a partial one; a file of
the same name is replaced.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from agent.io.errors import UsageError

_MAX_NAME_BYTES = 255


def check_file_name(name: str) -> str:
    """``name`` if it is a safe plain file name; ``UsageError`` saying why not otherwise."""
    if not name or name in (".", ".."):
        raise UsageError(f"file name {name!r} is not a file name")
    if "/" in name or "\\" in name or "\x00" in name:
        raise UsageError(f"file name {name!r} must not contain '/', '\\' or NUL")
    if len(name.encode("utf-8", "surrogateescape")) > _MAX_NAME_BYTES:
        raise UsageError(f"file name is longer than {_MAX_NAME_BYTES} bytes")
    if name.startswith(".mrc-partial-"):
        raise UsageError(f"file name {name!r} uses the agent's temporary-file prefix")
    return name


def prepare_out_dir(path: str) -> Path:
    """Create the directory if needed and check it is writable (at start, not mid-transfer)."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out-dir {path}: {exc.strerror}") from None
    if not directory.is_dir():
        raise UsageError(f"--out-dir {path} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"--out-dir {path} is not writable")
    return directory


def write_atomically(directory: Path, name: str, data: bytes | bytearray | memoryview) -> Path:
    """Write ``data`` as ``directory/name`` (replacing it), visible only once complete."""
    target = directory / check_file_name(name)
    handle, temporary = tempfile.mkstemp(prefix=".mrc-partial-", dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
