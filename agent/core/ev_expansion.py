"""EV profiles and their expansion: from a controller's compact EV to the bits on the wire.

OCP's controller API lets an operator describe EVs in two layers (the rules are those the
companion repository's ``examples/ev_expansion`` program demonstrates; this is an independent
implementation of them):

* an **EV format profile** says how the wire holds an EV: a mode (STEV: UDP source port and
  IPv6 flow label; UDP: the source port alone; SRv6: an IPv6 address, plus an SRH segment) and
  a list of *format fields*, each a width in bits. Concatenated, first field first, they are
  the EV as it travels, left-aligned in a 32-byte buffer;
* an **EV profile** has one *field* per format field (it may use fewer), each with a
  ``width``, an ``init_val``, a ``min_val`` / ``max_val`` (bounds for generated EVs) and a
  ``mask``. A *compact* EV is a bit string, read from its first bit on: field after field,
  each field takes as many bits as its mask has ones. The field's value is its ``init_val``
  with those bits laid into the mask's one-bits, the first bit taken into the highest one-bit.
  A field with mask 0 is fixed: it takes no bits and is always its ``init_val``.

The expanded EV is the fields' values, each right-aligned in its format field (zero-filled
above), concatenated, left-aligned in 32 bytes; bits after the last field are zero. A compact
EV must have no bit set past the bits its fields take.

Checks (``ProfileError`` names the offending field): as many fields as format fields at most,
the fields' widths together no wider than the format's, and *each* field no wider than its
format field (a wider field would lose its high bits on the wire: the testbed refuses it
rather than truncate); ``init_val`` and ``mask`` within the field's width; ``max_val`` within
what the mask's bits can hold. Generated EVs draw each field's bits from
``min_val``..``max_val``, where ``max_val`` 0 means "every value the mask's bits can hold".

Nothing here does I/O: the controller's command (``mrc-agent ctl ev expand``), the agent's
profile registry and the tests all call the same functions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from wire.entropy import ev_from_headers

#: Bytes of an expanded EV: room for an SRv6 address and an SRH segment (2 x 128 bits).
MAX_EV_BYTES: Final = 32
MAX_EV_BITS: Final = MAX_EV_BYTES * 8
#: Widest field (and format field): the OCP structures hold field values in 32 bits.
MAX_FIELD_WIDTH: Final = 32


class FormatMode(IntEnum):
    """How the wire carries an EV (values are OCP's mode bits)."""

    STEV = 1 << 0
    SRV6 = 1 << 1
    UDP = 1 << 2


class EvMode(IntEnum):
    """Where a profile's EVs come from (values are OCP's mode bits)."""

    #: The device picks them (here: random UDP source ports, with stand-ins).
    AUTO = 1 << 0
    #: The controller lists them.
    EXP = 1 << 1
    #: The device generates them from the fields' ranges.
    GEN = 1 << 2


#: Widest expanded EV each format mode can carry, in bits: STEV fills the 16-bit source port
#: and the 16 bits of the flow label the testbed uses, UDP the source port alone, SRv6 an
#: address and an SRH segment.
MODE_MAX_BITS: Final = {FormatMode.STEV: 32, FormatMode.UDP: 16, FormatMode.SRV6: MAX_EV_BITS}


class ProfileError(ValueError):
    """A profile, field or EV that breaks a rule; ``field`` names it (``fields[1].mask``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


@dataclass(frozen=True, slots=True)
class EvField:
    """One field of an EV profile (OCP's ``mrc_ctl_ev_field``)."""

    width: int
    init_val: int = 0
    min_val: int = 0
    max_val: int = 0
    mask: int = 0

    @property
    def bits(self) -> int:
        """How many bits of a compact EV this field takes: the ones in its mask."""
        return self.mask.bit_count()

    @property
    def generated_max(self) -> int:
        """The largest value generation draws (``max_val``, or all the mask can hold if 0)."""
        return self.max_val if self.max_val else (1 << self.bits) - 1


@dataclass(frozen=True, slots=True)
class Expansion:
    """One EV expanded: each field's value, and the expanded EV (``MAX_EV_BYTES`` bytes)."""

    values: tuple[int, ...]
    expanded: bytes

    @property
    def hex(self) -> str:
        """The expanded EV as the companion's example prints it: 0x and 64 hex digits."""
        return "0x" + self.expanded.hex()


def _u32(value: int) -> bool:
    return 0 <= value <= 0xFFFFFFFF


def check_format(mode: FormatMode, widths: Sequence[int], max_bits: int | None = None) -> None:
    """A format profile: 1 to 32 bits per field, at most ``max_bits`` in all (default: what
    the mode can carry)."""
    if not widths:
        raise ProfileError("fmt_fields", "a format profile needs at least one field")
    for index, width in enumerate(widths):
        if not 1 <= width <= MAX_FIELD_WIDTH:
            raise ProfileError(
                f"fmt_fields[{index}].width", f"must be 1-{MAX_FIELD_WIDTH} bits, got {width}"
            )
    limit = MODE_MAX_BITS[mode] if max_bits is None else max_bits
    total = sum(widths)
    if total > limit:
        raise ProfileError(
            "fmt_fields", f"{total} bits in all, more than the {limit} a {mode.name} EV holds"
        )


def check_fields(
    fmt_widths: Sequence[int], fields: Sequence[EvField], mode: EvMode = EvMode.EXP
) -> None:
    """An EV profile's fields against its format's widths (see the module docstring)."""
    if not fields:
        raise ProfileError("fields", "an EV profile needs at least one field")
    if len(fields) > len(fmt_widths):
        raise ProfileError(
            "fields", f"{len(fields)} fields, more than the format's {len(fmt_widths)}"
        )
    if sum(f.width for f in fields) > sum(fmt_widths):
        raise ProfileError(
            "fields",
            f"{sum(f.width for f in fields)} bits in all, wider than the format's "
            f"{sum(fmt_widths)}",
        )
    for index, (field, slot) in enumerate(zip(fields, fmt_widths, strict=False)):
        name = f"fields[{index}]"
        for attribute in ("width", "init_val", "min_val", "max_val", "mask"):
            value = getattr(field, attribute)
            if type(value) is not int or not _u32(value):
                raise ProfileError(f"{name}.{attribute}", "must be a 32-bit unsigned integer")
        if not 1 <= field.width <= MAX_FIELD_WIDTH:
            raise ProfileError(
                f"{name}.width", f"must be 1-{MAX_FIELD_WIDTH} bits, got {field.width}"
            )
        if field.width > slot:
            raise ProfileError(
                f"{name}.width",
                f"{field.width} bits do not fit format field {index} ({slot} bits)",
            )
        full = (1 << field.width) - 1
        if field.init_val > full:
            raise ProfileError(
                f"{name}.init_val", f"{field.init_val:#x} is wider than {field.width} bits"
            )
        if field.mask & ~full:
            raise ProfileError(
                f"{name}.mask", f"{field.mask:#x} has bits outside the field's {field.width}"
            )
        if field.mask:
            room = (1 << field.bits) - 1
            if field.max_val > room:
                raise ProfileError(
                    f"{name}.max_val",
                    f"{field.max_val:#x} does not fit the mask's {field.bits} bits",
                )
            if mode is EvMode.GEN and field.min_val > field.generated_max:
                raise ProfileError(
                    f"{name}.min_val",
                    f"{field.min_val:#x} is above the largest generated value "
                    f"{field.generated_max:#x}",
                )


def compact_bits(fields: Sequence[EvField]) -> int:
    """Bits of a compact EV the fields take, together."""
    return sum(field.bits for field in fields)


def parse_ev(text: str, field: str = "ev") -> bytes:
    """A compact EV written in hex (``0x`` optional, whole bytes, at most 32 of them): the
    bytes in order, zero-padded at the end to ``MAX_EV_BYTES``."""
    if not isinstance(text, str):
        raise ProfileError(field, f"must be a hex string, got {type(text).__name__}")
    digits = text[2:] if text[:2].lower() == "0x" else text
    if not digits or len(digits) % 2:
        raise ProfileError(field, f"{text!r} is not whole bytes of hex digits")
    if len(digits) > 2 * MAX_EV_BYTES:
        raise ProfileError(field, f"{text!r} is longer than {MAX_EV_BYTES} bytes")
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        raise ProfileError(field, f"{text!r} is not hex") from None
    return raw.ljust(MAX_EV_BYTES, b"\0")


def format_ev(ev: bytes, bits: int | None = None) -> str:
    """A compact EV as hex: all 32 bytes, or the whole bytes that hold its first ``bits``."""
    if bits is None:
        return "0x" + ev.hex()
    return "0x" + ev[: max(1, (bits + 7) // 8)].hex()


def _spread(value: int, mask: int, init: int) -> int:
    """``init`` with the low bits of ``value`` laid into ``mask``'s one-bits, lowest first
    (so the first bit taken from the EV, the highest of ``value``, lands highest)."""
    result = init
    position = 0
    remaining = mask
    while remaining:
        low = remaining & -remaining
        if (value >> position) & 1:
            result |= low
        else:
            result &= ~low
        remaining ^= low
        position += 1
    return result


def field_values(fields: Sequence[EvField], ev: bytes, index: int | None = None) -> list[int]:
    """Each field's value for compact EV ``ev`` (``MAX_EV_BYTES`` bytes). ``ProfileError``
    (naming ``evs[index]``) when ``ev`` has bits set past those the fields take."""
    whole = int.from_bytes(ev, "big")
    offset = 0
    values: list[int] = []
    for field in fields:
        taken = field.bits
        if taken:
            chunk = (whole >> (MAX_EV_BITS - offset - taken)) & ((1 << taken) - 1)
            values.append(_spread(chunk, field.mask, field.init_val))
            offset += taken
        else:
            values.append(field.init_val)
    if whole & ((1 << (MAX_EV_BITS - offset)) - 1):
        name = "ev" if index is None else f"evs[{index}]"
        raise ProfileError(name, f"has bits set past the {offset} bits its fields take")
    return values


def pack(fmt_widths: Sequence[int], values: Sequence[int]) -> bytes:
    """The fields' values, each right-aligned in its format field, concatenated from the
    first bit on, in ``MAX_EV_BYTES`` bytes."""
    packed = 0
    total = 0
    for width, value in zip(fmt_widths, values, strict=False):
        packed = (packed << width) | (value & ((1 << width) - 1))
        total += width
    return (packed << (MAX_EV_BITS - total)).to_bytes(MAX_EV_BYTES, "big")


def expand(fmt_widths: Sequence[int], fields: Sequence[EvField], ev: bytes) -> Expansion:
    """Expand compact EV ``ev`` (checked profiles assumed: see ``check_fields``)."""
    values = field_values(fields, ev)
    return Expansion(tuple(values), pack(fmt_widths, values))


def check_generated(fields: Sequence[EvField], ev: bytes, index: int) -> None:
    """A generated EV's bits per field lie within ``min_val``..``max_val``."""
    whole = int.from_bytes(ev, "big")
    offset = 0
    for number, field in enumerate(fields):
        taken = field.bits
        if not taken:
            continue
        chunk = (whole >> (MAX_EV_BITS - offset - taken)) & ((1 << taken) - 1)
        offset += taken
        if not field.min_val <= chunk <= field.generated_max:
            raise ProfileError(
                f"evs[{index}]",
                f"field {number}'s generated bits {chunk:#x} lie outside "
                f"min_val..max_val {field.min_val:#x}..{field.generated_max:#x}",
            )


def generation_count(fields: Sequence[EvField]) -> int:
    """How many distinct EVs the fields can generate."""
    count = 1
    for field in fields:
        if field.bits:
            count *= max(0, field.generated_max - field.min_val + 1)
    return count


def compact(fields: Sequence[EvField], chunks: Sequence[int]) -> bytes:
    """The compact EV whose fields take the bits ``chunks`` (one per field with a mask)."""
    whole = 0
    offset = 0
    masked = [field for field in fields if field.bits]
    for field, chunk in zip(masked, chunks, strict=True):
        whole = (whole << field.bits) | chunk
        offset += field.bits
    return (whole << (MAX_EV_BITS - offset)).to_bytes(MAX_EV_BYTES, "big")


def generate(fields: Sequence[EvField], count: int, seed: int = 0) -> list[bytes]:
    """``count`` distinct compact EVs drawn within the fields' ranges.

    All of them, in order (first field most significant) when ``count`` is every EV the
    fields can make; otherwise a sample without repeats that ``seed`` fixes, so that a
    profile's EVs spread over every field's range rather than fill the first values of the
    last field (*testbed choice*: the OCP text leaves the choice to the device).
    """
    total = generation_count(fields)
    if count < 1:
        raise ProfileError("ev_count", f"must be at least 1, got {count}")
    if count > total:
        raise ProfileError(
            "ev_count", f"{count} EVs asked, but the fields can generate only {total}"
        )
    indices: Sequence[int] = (
        range(total) if count == total else random.Random(seed).sample(range(total), count)
    )
    masked = [field for field in fields if field.bits]
    out: list[bytes] = []
    for index in indices:
        chunks: list[int] = []
        for field in reversed(masked):
            span = field.generated_max - field.min_val + 1
            index, digit = divmod(index, span)
            chunks.append(field.min_val + digit)
        chunks.reverse()
        out.append(compact(fields, chunks))
    return out


def wire_ev(mode: FormatMode, expanded: bytes, ipv6: bool) -> int:
    """The testbed's 32-bit EV for an expanded EV (``wire.entropy``): its first two bytes are the
    UDP source port, the next two the flow label (STEV over IPv6 only; IPv4 has no flow label).
    ``ProfileError`` for SRv6 (the agent sends no SRv6) or a source port of 0."""
    if mode is FormatMode.SRV6:
        raise ProfileError("ev_fmt_mode", "SRv6 EVs cannot be sent by this agent")
    port = int.from_bytes(expanded[0:2], "big")
    label = int.from_bytes(expanded[2:4], "big") if mode is FormatMode.STEV and ipv6 else 0
    if port == 0:
        raise ProfileError("ev", "expands to UDP source port 0, which no packet may carry")
    return ev_from_headers(port, label)
