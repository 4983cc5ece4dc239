"""Sending a file: RDMA writes of its pieces, then the receiver's digest of what it stored.

The file is read whole (the receiver registers a region of the same size, so memory is spent
on both sides anyway) and written as messages of ``message_size`` bytes, each at its own
offset of the peer's region. ``MessageAcked`` means the receiver placed every byte of that
message; once all are acknowledged the client sends ``commit`` with the SHA-256 of the file,
the receiver writes the region to its ``--out-dir``, hashes what it wrote and answers
``committed`` with that digest. The transfer succeeds only when the two digests agree: "exit 0
only when the receiver confirmed every byte" means exactly that.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from agent.core import MessageAcked, MrcConfig
from agent.io.addresses import PeerAddress
from agent.io.errors import ProtocolError, TransferFailedError, UsageError
from agent.io.out_dir import check_file_name
from agent.io.outbound import STALL_TIMEOUT, OutboundTransfer
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import Commit, Committed, Purpose, SideMessage
from agent.io.transport import MRC, RoceSetup, Transport

log = logging.getLogger(__name__)

#: Default size of each RDMA write of a file: large enough that the per-message ACK is noise,
#: small enough that several are in flight and a failed one is cheap to report.
DEFAULT_FILE_MESSAGE_SIZE = 1 << 20
#: Largest file: the region length travels as 32 bits (RETH's DMA length).
MAX_FILE_SIZE = 0xFFFFFFFF


def check_file_for_sending(path: str) -> int:
    """The size of the file at ``path``; ``UsageError`` if it cannot be sent (missing, not a
    regular file, unreadable, empty, or larger than one transfer carries)."""
    file = Path(path)
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not file.is_file():
        raise UsageError(f"{path} is not a regular file")
    if not os.access(file, os.R_OK):
        raise UsageError(f"cannot read {path}: permission denied")
    if size == 0:
        raise UsageError(f"{path} is empty: there is nothing to send")
    if size > MAX_FILE_SIZE:
        raise UsageError(f"{path} is {size} bytes; the most one transfer carries is 4 GiB - 1")
    return size


def read_file_for_sending(path: str) -> bytes:
    """The file's bytes, after the checks of ``check_file_for_sending``."""
    check_file_for_sending(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not data:
        raise UsageError(f"{path} is empty: there is nothing to send")
    return data


class FileTransfer(OutboundTransfer):
    """One file to one peer."""

    purpose = Purpose.FILE

    def __init__(
        self,
        runtime: AgentRuntime,
        peer: PeerAddress,
        data: bytes,
        name: str,
        *,
        message_size: int = DEFAULT_FILE_MESSAGE_SIZE,
        config: MrcConfig | None = None,
        stall_timeout: float = STALL_TIMEOUT,
        transport: Transport = MRC,
        roce: RoceSetup | None = None,
    ) -> None:
        if message_size < 1:
            raise UsageError(f"message size must be positive, got {message_size}")
        super().__init__(
            runtime,
            peer,
            length=len(data),
            message_size=message_size,
            name=check_file_name(name),
            config=config,
            stall_timeout=stall_timeout,
            transport=transport,
            roce=roce,
        )
        self._data = memoryview(data)
        self.sha256 = hashlib.sha256(data).hexdigest()
        self._next_offset = 0
        self._outstanding = 0
        self.bytes_acked = 0
        self.messages = 0
        self._started_at = 0.0
        self._acked_at = 0.0

    def _begin(self) -> None:
        self._started_at = self.runtime.clock()
        self._post_more()

    def _post_more(self) -> None:
        size = self.message_size
        total = self.length
        while self._outstanding < self.max_outstanding and self._next_offset < total:
            offset = self._next_offset
            end = min(offset + size, total)
            if not self.post(bytes(self._data[offset:end]), offset):
                return
            self._next_offset = end
            self._outstanding += 1
            self.messages += 1

    def _on_acked(self, event: MessageAcked) -> None:
        self._outstanding -= 1
        self.bytes_acked += event.length
        if self.bytes_acked < self.length:
            self._post_more()
            return
        self._acked_at = self.runtime.clock()
        log.info("all %d bytes acknowledged by %s; committing", self.length, self.peer)
        self.send_side(Commit(self.sha256), "committed")

    def _on_side_message(self, message: SideMessage) -> None:
        if not isinstance(message, Committed):
            self._fail(ProtocolError(f"expected 'committed' from {self.peer}, got {message}"))
            return
        if message.sha256 != self.sha256 or message.length != self.length:
            self._fail(
                TransferFailedError(
                    f"{self.peer} stored {message.length} bytes with SHA-256 {message.sha256}, "
                    f"but {self.length} bytes with SHA-256 {self.sha256} were sent"
                )
            )
            return
        seconds = max(self._acked_at - self._started_at, 1e-9)
        self.finish(
            {
                "bytes": self.length,
                "messages": self.messages,
                "seconds": seconds,
                "goodput_bps": self.length * 8 / seconds,
                "sha256": self.sha256,
                "remote_path": message.path,
                "peer": str(self.peer),
            }
        )
