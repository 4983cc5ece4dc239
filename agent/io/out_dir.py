"""Writing completed incoming transfers to the agent's ``--out-dir``.

A name comes from the peer, so it is checked before it touches the file system: a plain file
name only (no directory part, no ``..``, no NUL, at most 255 bytes), which keeps every write
inside the directory. Files are written under a temporary name and renamed into place, so a
reader of the directory sees either nothing or the whole file, never a partial one; a file of
the same name is replaced. An incoming transfer is a ``PartFile``: a ``.part`` file mapped
into memory that the core writes packets into as they arrive, so its size is bounded by the
disk, not by the agent's memory; it is renamed on commit and removed otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import tempfile
from pathlib import Path

from agent.io.errors import UsageError

_MAX_NAME_BYTES = 255
_PARTIAL_PREFIX = ".mrc-partial-"


def check_file_name(name: str) -> str:
    """``name`` if it is a safe plain file name; ``UsageError`` saying why not otherwise."""
    if not name or name in (".", ".."):
        raise UsageError(f"file name {name!r} is not a file name")
    if "/" in name or "\\" in name or "\x00" in name:
        raise UsageError(f"file name {name!r} must not contain '/', '\\' or NUL")
    if len(name.encode("utf-8", "surrogateescape")) > _MAX_NAME_BYTES:
        raise UsageError(f"file name is longer than {_MAX_NAME_BYTES} bytes")
    if name.startswith(_PARTIAL_PREFIX):
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
    handle, temporary = tempfile.mkstemp(prefix=_PARTIAL_PREFIX, dir=directory)
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


class PartFile:
    """A ``.part`` file of a fixed length in ``directory``, mapped shared: ``view`` is the
    memory a receive region exposes, and every byte written there lands in the file."""

    def __init__(self, directory: Path, length: int) -> None:
        if length < 1:
            raise ValueError("a part file holds at least one byte")
        handle, temporary = tempfile.mkstemp(prefix=_PARTIAL_PREFIX, suffix=".part", dir=directory)
        self.path = Path(temporary)
        try:
            os.ftruncate(handle, length)
            self._map = mmap.mmap(handle, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(handle)
            self.path.unlink(missing_ok=True)
            raise
        os.close(handle)  # the mapping keeps the file open
        self.view: memoryview | None = memoryview(self._map)
        self.length = length

    def sha256(self) -> str:
        """Digest of the bytes written so far (the whole length)."""
        return hashlib.sha256(self._map).hexdigest()

    def commit(self, name: str) -> Path:
        """Flush to disk and rename to ``name`` in the same directory (replacing a file of
        that name); the part file is gone afterwards."""
        target = self.path.parent / check_file_name(name)
        self._map.flush()
        self._unmap()
        with open(self.path, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(self.path, target)
        return target

    def discard(self) -> None:
        """Unmap and remove the part file (no effect after ``commit`` or a second call)."""
        self._unmap()
        self.path.unlink(missing_ok=True)

    def _unmap(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()
