"""Batched datagram system calls: ``sendmmsg(2)`` and ``recvmmsg(2)`` through ctypes.

Why: at a few hundred thousand packets per second, a Python agent pays one system call per
datagram on each side, plus the socket module's per-call work (parsing the address tuple,
building the ancillary-data list of tuples); batching both is about a quarter faster
(docs/performance.md). Python's ``socket`` module offers neither call, so they are bound here
from the C library with ctypes.

Both classes own fixed, preallocated memory: ``slots`` message headers, each pointing at its
own buffer (and, for receiving, its own address and control-message space), built once, so a
batch costs the copy of each packet into its slot, a couple of ``pack_into`` per packet and
one foreign call. Nothing here knows MRC: ``raw_sender`` and ``udp_receiver`` build on it,
and fall back to one ``sendmsg`` / ``recvmsg_into`` per datagram where ``available()`` is
False (a libc without these calls, or ``MRC_AGENT_NO_MMSG=1`` in the environment, which keeps
the plain path reachable for comparison and troubleshooting).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Callable

#: Messages per batch: the runtime drains and sends in batches of this size anyway.
DEFAULT_SLOTS = 64
#: Environment variable that turns batching off (any non-empty value but "0").
DISABLE_ENV = "MRC_AGENT_NO_MMSG"


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p),
        ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.c_void_p),
        ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p),
        ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


MMSGHDR_SIZE = ctypes.sizeof(_Mmsghdr)
IOVEC_SIZE = ctypes.sizeof(_Iovec)
_IOV_LEN_OFFSET = _Iovec.iov_len.offset
_NAMELEN_OFFSET = _Msghdr.msg_namelen.offset
_CONTROLLEN_OFFSET = _Msghdr.msg_controllen.offset
_FLAGS_OFFSET = _Msghdr.msg_flags.offset
_MSG_LEN_OFFSET = _Mmsghdr.msg_len.offset
#: ``size_t`` in ``=`` (standard-size, unaligned) struct notation.
_SIZE_T_CHAR = "Q" if ctypes.sizeof(ctypes.c_size_t) == 8 else "I"
_SIZE_T = struct.Struct("=" + _SIZE_T_CHAR)
#: Where each message's ``msg_iov[0].iov_len`` sits in the iovec array: ``slot * IOVEC_SIZE +
#: IOV_LEN_OFFSET`` (public so the senders' per-packet loops can ``pack_into`` it inline).
IOV_LEN_OFFSET = _IOV_LEN_OFFSET
IOV_LEN = _SIZE_T
_UINT = struct.Struct("=I")
_INT = struct.Struct("=i")
#: ``struct cmsghdr``: size_t cmsg_len; int cmsg_level; int cmsg_type; then the data, and
#: each control message starts at a multiple of sizeof(size_t) (CMSG_ALIGN).
_CMSGHDR = struct.Struct(f"={_SIZE_T_CHAR}ii")
_CMSG_ALIGN = ctypes.sizeof(ctypes.c_size_t)
#: What ``recvmmsg`` wrote into one message header, read in one unpack at
#: ``slot * MMSGHDR_SIZE + RESULT_OFFSET``: (control bytes, ``msg_flags``, datagram bytes).
RESULT_OFFSET = _CONTROLLEN_OFFSET
RESULT = struct.Struct(
    f"={_SIZE_T_CHAR}{_FLAGS_OFFSET - _CONTROLLEN_OFFSET - _SIZE_T.size}xi"
    f"{_MSG_LEN_OFFSET - _FLAGS_OFFSET - _INT.size}xI"
)
#: Room for any socket address the agent sends to or receives from (``struct sockaddr_in6``,
#: 28 bytes), rounded up to the alignment control messages need.
NAME_SPACE = 32

_RESULTS: dict[int, struct.Struct] = {}


def results(count: int) -> struct.Struct:
    """``RESULT`` of ``count`` consecutive message headers in one struct, to unpack at
    ``RESULT_OFFSET``: (control bytes, ``msg_flags``, datagram bytes) per message, in order.
    One call per batch instead of one per datagram (a struct call costs a receiver about a
    tenth of a microsecond per datagram)."""
    layout = _RESULTS.get(count)
    if layout is None:
        if count < 1:
            raise ValueError("need at least one message header")
        one = RESULT.format.lstrip("=")
        gap = f"{MMSGHDR_SIZE - RESULT.size}x"
        layout = _RESULTS[count] = struct.Struct("=" + gap.join([one] * count))
    return layout


SyscallFn = Callable[[int, int, int, int], int]
"""``sendmmsg(fd, msgvec, vlen, flags)`` as bound by ctypes (tests substitute their own)."""


def _libc_functions() -> tuple[SyscallFn | None, Callable[..., int] | None]:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        send = libc.sendmmsg
        receive = libc.recvmmsg
    except (OSError, AttributeError):
        return None, None
    send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    send.restype = ctypes.c_int
    receive.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    receive.restype = ctypes.c_int
    return send, receive


_SENDMMSG, _RECVMMSG = _libc_functions()


def available() -> bool:
    """Whether batched calls can be used here (and are not turned off by the environment)."""
    disabled = os.environ.get(DISABLE_ENV, "") not in ("", "0")
    return not disabled and _SENDMMSG is not None and _RECVMMSG is not None


def _address(buffer: ctypes.Array[ctypes.c_char]) -> int:
    return ctypes.addressof(buffer)


def _writable_view(array: ctypes.Array, size: int) -> memoryview:  # type: ignore[type-arg]
    """A byte view of a ctypes array's memory, for ``pack_into``."""
    return memoryview((ctypes.c_char * size).from_address(ctypes.addressof(array))).cast("B")


def split_control(control: bytes | memoryview) -> list[tuple[int, int, bytes]]:
    """The control messages of a received datagram as ``(level, type, data)`` tuples, the form
    ``socket.recvmsg`` gives them in; a truncated trailing message is left out."""
    messages: list[tuple[int, int, bytes]] = []
    offset = 0
    header = _CMSGHDR.size
    end = len(control)
    while offset + header <= end:
        length, level, kind = _CMSGHDR.unpack_from(control, offset)
        if length < header or offset + length > end:
            break
        messages.append((level, kind, bytes(control[offset + header : offset + length])))
        offset += (length + _CMSG_ALIGN - 1) & ~(_CMSG_ALIGN - 1)
    return messages


class SendBatch:
    """``slots`` outgoing datagrams, each copied into its own ``slot_size``-byte buffer, sent
    with one ``sendmmsg`` per ``flush``.

    The caller writes each datagram's bytes into ``buffer`` at ``slot * slot_size`` (see
    ``set_length``) and its destination with ``set_name``; ``flush`` then sends slots
    ``0..count-1`` in order.
    """

    def __init__(
        self, slots: int = DEFAULT_SLOTS, slot_size: int = 9216, call: SyscallFn | None = None
    ) -> None:
        if slots < 1 or slot_size < 1:
            raise ValueError("need at least one slot of at least one byte")
        self.slots = slots
        self.slot_size = slot_size
        self._call = call if call is not None else _SENDMMSG
        self._data = ctypes.create_string_buffer(slots * slot_size)
        self._names = ctypes.create_string_buffer(slots * NAME_SPACE)
        self._iovecs = (_Iovec * slots)()
        self._messages = (_Mmsghdr * slots)()
        data, names = _address(self._data), _address(self._names)
        for slot in range(slots):
            self._iovecs[slot].iov_base = data + slot * slot_size
            header = self._messages[slot].msg_hdr
            header.msg_name = names + slot * NAME_SPACE
            header.msg_iov = ctypes.addressof(self._iovecs[slot])
            header.msg_iovlen = 1
        #: The slots' bytes: datagram ``i`` goes at ``i * slot_size``.
        self.buffer = memoryview(self._data).cast("B")
        self._names_view = memoryview(self._names).cast("B")
        #: The iovec array's bytes: datagram ``i``'s length goes at ``i * IOVEC_SIZE +
        #: IOV_LEN_OFFSET`` (``set_length`` does it; hot loops pack it inline).
        self.iov_view = _writable_view(self._iovecs, slots * IOVEC_SIZE)
        self._msg_view = _writable_view(self._messages, slots * MMSGHDR_SIZE)
        self._vector = ctypes.addressof(self._messages)
        #: The name each slot holds now (``set_name`` skips rewriting the same one).
        self.slot_names: list[bytes | None] = [None] * slots

    def set_length(self, slot: int, length: int) -> None:
        """Datagram ``slot`` is ``length`` bytes long (written at ``slot * slot_size``)."""
        _SIZE_T.pack_into(self.iov_view, slot * IOVEC_SIZE + _IOV_LEN_OFFSET, length)

    def set_name(self, slot: int, name: bytes) -> None:
        """Datagram ``slot`` goes to the socket address ``name`` (a packed ``sockaddr``)."""
        if self.slot_names[slot] is name:
            return
        self.slot_names[slot] = name
        self._names_view[slot * NAME_SPACE : slot * NAME_SPACE + len(name)] = name
        _UINT.pack_into(self._msg_view, slot * MMSGHDR_SIZE + _NAMELEN_OFFSET, len(name))

    def flush(self, fd: int, count: int, start: int = 0) -> tuple[int, int]:
        """Send slots ``start..count-1`` in order, in as few calls as the kernel allows.

        Returns ``(sent, error)``: how many went out from ``start`` on, and 0 if all did, else
        the errno that stopped the slot after them (the caller decides whether that slot is
        retried later, EAGAIN, or dropped).
        """
        call = self._call
        if call is None:
            raise OSError(errno.ENOSYS, "sendmmsg is not available")
        sent = 0
        index = start
        while index < count:
            result = call(fd, self._vector + index * MMSGHDR_SIZE, count - index, 0)
            if result > 0:
                sent += result
                index += result
                continue
            error = ctypes.get_errno() if result < 0 else errno.EAGAIN
            if error == errno.EINTR:
                continue
            return sent, error or errno.EIO
        return sent, 0


class ReceiveBatch:
    """Up to ``slots`` datagrams per ``receive``, each with its source address and control
    messages, read with one ``recvmmsg``.

    Each slot's source address and control messages lie next to each other in ``meta`` (the
    address at ``slot * meta_size``, the control messages ``NAME_SPACE`` bytes after it), so
    the receive loop can take both as one slice: for one flow on one EV they are the same
    bytes packet after packet, and serve as the key of what was parsed from them.
    """

    def __init__(
        self,
        slots: int = DEFAULT_SLOTS,
        slot_size: int = 9216,
        control_size: int = 128,
        call: Callable[..., int] | None = None,
    ) -> None:
        if slots < 1 or slot_size < 1:
            raise ValueError("need at least one slot of at least one byte")
        self.slots = slots
        self.slot_size = slot_size
        self.control_size = control_size
        #: Bytes of ``meta`` per slot: the address, then room for the control messages.
        self.meta_size = NAME_SPACE + ((control_size + _CMSG_ALIGN - 1) & ~(_CMSG_ALIGN - 1))
        self._call = call if call is not None else _RECVMMSG
        self._data = ctypes.create_string_buffer(slots * slot_size)
        self._meta = ctypes.create_string_buffer(slots * self.meta_size)
        self._iovecs = (_Iovec * slots)()
        self._messages = (_Mmsghdr * slots)()
        data, meta = _address(self._data), _address(self._meta)
        for slot in range(slots):
            self._iovecs[slot].iov_base = data + slot * slot_size
            self._iovecs[slot].iov_len = slot_size
            header = self._messages[slot].msg_hdr
            header.msg_name = meta + slot * self.meta_size
            header.msg_namelen = NAME_SPACE
            header.msg_iov = ctypes.addressof(self._iovecs[slot])
            header.msg_iovlen = 1
            header.msg_control = meta + slot * self.meta_size + NAME_SPACE
            header.msg_controllen = control_size
        # The kernel overwrites each header's name and control lengths and flags: a pristine
        # copy is put back before every call, in one memmove.
        self._template = ctypes.create_string_buffer(
            ctypes.string_at(ctypes.addressof(self._messages), slots * MMSGHDR_SIZE)
        )
        #: Received bytes: datagram ``i`` starts at ``i * slot_size``.
        self.data = memoryview(self._data).cast("B")
        #: Source addresses and control messages (see the class doc).
        self.meta = memoryview(self._meta).cast("B")
        #: The message headers' bytes, for ``RESULT.unpack_from`` (see ``RESULT_OFFSET``).
        self.headers = _writable_view(self._messages, slots * MMSGHDR_SIZE)
        self._msg_view = self.headers
        self._vector = ctypes.addressof(self._messages)

    def receive(self, fd: int, limit: int) -> int:
        """Read up to ``min(limit, slots)`` waiting datagrams; returns how many (0 when none
        is waiting). Raises ``OSError`` for any other failure."""
        want = min(limit, self.slots)
        call = self._call
        if call is None:
            raise OSError(errno.ENOSYS, "recvmmsg is not available")
        # Bytes of a slot's name area beyond the address the kernel wrote keep what was there
        # (zeros, or a longer address read earlier from another family's socket): a key made
        # of the whole area is then only more specific, never ambiguous.
        ctypes.memmove(self._vector, self._template, want * MMSGHDR_SIZE)
        while True:
            result = call(fd, self._vector, want, 0, None)
            if result >= 0:
                return int(result)
            error = ctypes.get_errno()
            if error == errno.EINTR:
                continue
            if error in (errno.EAGAIN, errno.EWOULDBLOCK):
                return 0
            raise OSError(error, os.strerror(error))

    def length(self, slot: int) -> int:
        """Bytes datagram ``slot`` carried."""
        return int(_UINT.unpack_from(self._msg_view, slot * MMSGHDR_SIZE + _MSG_LEN_OFFSET)[0])

    def flags(self, slot: int) -> int:
        """``msg_flags`` of datagram ``slot`` (``MSG_TRUNC``, ``MSG_CTRUNC``)."""
        return int(_INT.unpack_from(self._msg_view, slot * MMSGHDR_SIZE + _FLAGS_OFFSET)[0])

    def control_length(self, slot: int) -> int:
        """Bytes of control messages datagram ``slot`` came with."""
        offset = slot * MMSGHDR_SIZE + _CONTROLLEN_OFFSET
        return int(_SIZE_T.unpack_from(self._msg_view, offset)[0])

    def name_length(self, slot: int) -> int:
        """Bytes of datagram ``slot``'s source address."""
        offset = slot * MMSGHDR_SIZE + _NAMELEN_OFFSET
        return int(_UINT.unpack_from(self._msg_view, offset)[0])

    def name(self, slot: int) -> memoryview:
        """Datagram ``slot``'s source address (a ``sockaddr``)."""
        start = slot * self.meta_size
        return self.meta[start : start + self.name_length(slot)]

    def control_bytes(self, slot: int) -> memoryview:
        """Datagram ``slot``'s control messages."""
        start = slot * self.meta_size + NAME_SPACE
        return self.meta[start : start + self.control_length(slot)]
