"""``mrc-agent ctl ev expand FILE``: EV profiles written as JSON, checked and expanded offline.

The document's keys are the OCP structures' own field names, so a controller's configuration
can be tried before any agent runs::

    {"name": "two 16-bit tiers",                       # optional
     "ev_fmt_profile": {"ev_fmt_mode": "STEV",         # or "type"; STEV, SRv6, UDP
                        "fmt_fields": [{"width": 16}, {"width": 16}]},
     "ev_profile": {"ev_mode": "EXP",                  # or "type"; EXP(licit), GEN(erated)
                    "fields": [{"width": 16, "init_val": 0, "min_val": 0,
                                "max_val": 0, "mask": "0xffff"}, ...],
                    "evs": ["0x1234abcd", {"val": "0x0001ffff", "port": 1}],
                    "ev_count": 8, "seed": 0}}         # GEN without "evs": generate them

or a JSON list of such documents. Numbers may be JSON integers or strings (``"0xffff"``).
EVs are hex strings read from their first digit on (see ``agent.core.ev_expansion``); a
generated profile's EVs are checked against the fields' ranges. Every rule broken is reported
as a ``DocumentError`` naming the case and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core.ev_expansion import (
    EvField,
    EvMode,
    Expansion,
    FormatMode,
    ProfileError,
    check_fields,
    check_format,
    check_generated,
    compact_bits,
    expand,
    format_ev,
    generate,
    parse_ev,
    wire_ev,
)
from wire.entropy import ev_flow_label, ev_source_port

#: Largest document read: profiles are small, and a typo should not read a disk image.
MAX_DOCUMENT_BYTES = 16 << 20
#: Most EVs one case may expand or generate.
MAX_EVS = 65536

_FORMAT_NAMES = {"STEV": FormatMode.STEV, "SRV6": FormatMode.SRV6, "UDP": FormatMode.UDP}
_MODE_NAMES = {
    "AUTO": EvMode.AUTO,
    "EXP": EvMode.EXP,
    "EXPLICIT": EvMode.EXP,
    "GEN": EvMode.GEN,
    "GENERATED": EvMode.GEN,
}
_FORMAT_LABEL = {FormatMode.STEV: "STEV", FormatMode.SRV6: "SRv6", FormatMode.UDP: "UDP"}
_MODE_LABEL = {EvMode.AUTO: "Auto", EvMode.EXP: "Explicit", EvMode.GEN: "Generated"}
_FIELD_KEYS = ("width", "init_val", "min_val", "max_val", "mask")


class DocumentError(ValueError):
    """A document that cannot be expanded; the message names the case and the field."""


@dataclass(frozen=True, slots=True)
class ExpandedEv:
    """One EV of a case: the compact EV, its port, each field's value and the expansion."""

    ev: bytes
    port: int
    expansion: Expansion


@dataclass(frozen=True, slots=True)
class Case:
    """One format profile and EV profile, checked, with its EVs expanded."""

    name: str
    fmt_mode: FormatMode
    fmt_widths: tuple[int, ...]
    ev_mode: EvMode
    fields: tuple[EvField, ...]
    evs: tuple[ExpandedEv, ...]

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form (``--json``)."""
        bits = compact_bits(self.fields)
        return {
            "name": self.name,
            "ev_fmt_profile": {
                "ev_fmt_mode": _FORMAT_LABEL[self.fmt_mode],
                "fmt_fields": [{"width": w} for w in self.fmt_widths],
            },
            "ev_profile": {
                "ev_mode": self.ev_mode.name,
                "fields": [
                    {key: getattr(field, key) for key in _FIELD_KEYS} for field in self.fields
                ],
                "compact_bits": bits,
            },
            "evs": [self._ev_json(item, bits) for item in self.evs],
        }

    def _ev_json(self, item: ExpandedEv, bits: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ev": format_ev(item.ev, bits),
            "port": item.port,
            "fields": list(item.expansion.values),
            "expanded": item.expansion.hex,
        }
        if self.fmt_mode is not FormatMode.SRV6:
            try:
                value = wire_ev(self.fmt_mode, item.expansion.expanded, ipv6=True)
            except ProfileError as exc:
                out["wire"] = {"error": exc.reason}
            else:
                out["wire"] = {
                    "udp_source_port": ev_source_port(value),
                    "flow_label": ev_flow_label(value),
                }
        return out

    def to_text(self) -> str:
        """The layout the companion's example prints: both profiles, then every EV's
        fields (in hex, as wide as their format fields) and its expanded value."""
        lines = [f"-- {self.name} --", "", "ev_fmt_prof:"]
        lines.append(f"  type: {_FORMAT_LABEL[self.fmt_mode]}")
        lines.append(f"  fmt_fields: {len(self.fmt_widths)}")
        lines.extend(f"    {i:02d}: width={w}" for i, w in enumerate(self.fmt_widths))
        lines += ["", "ev_prof:", f"  type: {_MODE_LABEL[self.ev_mode]}"]
        lines.append(f"  fields: {len(self.fields)}")
        for i, f in enumerate(self.fields):
            lines.append(
                f"    {i:02d}: width={f.width}, init_val={f.init_val:#x}, "
                f"min={f.min_val:#x} max={f.max_val:#x} mask={f.mask:#x}"
            )
        lines.append(f"  evs: {len(self.evs)}")
        lines.extend(f"    {i:02d}: {format_ev(e.ev)}" for i, e in enumerate(self.evs))
        lines += ["", "EXPANDED EVs:"]
        for i, item in enumerate(self.evs):
            values = " ".join(
                f"fld{n}=0x{value:0{(width + 3) // 4}x}"
                for n, (width, value) in enumerate(
                    zip(self.fmt_widths, item.expansion.values, strict=False)
                )
            )
            lines.append(f"  {i:02d}: {values}")
            lines.append(f"      {item.expansion.hex}")
        return "\n".join(lines)


def load_document(path: str) -> list[Case]:
    """Read, check and expand every case in the JSON file at ``path``."""
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise DocumentError(f"{path}: {exc.strerror}") from None
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"{path}: larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DocumentError(f"{path}: not JSON: {exc}") from None
    return parse_document(document)


def parse_document(document: object) -> list[Case]:
    """Check and expand a decoded document (one case object, or a list of them)."""
    items = document if isinstance(document, list) else [document]
    if not items:
        raise DocumentError("the document holds no case")
    return [parse_case(item, index) for index, item in enumerate(items)]


def parse_case(item: object, index: int = 0) -> Case:
    """One case; ``DocumentError`` names the case and the field that is wrong."""
    label = f"case {index}"
    if not isinstance(item, dict):
        raise DocumentError(f"{label}: expected a JSON object")
    name = item.get("name", label)
    if not isinstance(name, str):
        raise DocumentError(f"{label}: 'name' must be a string")
    try:
        return _parse_case(item, name)
    except ProfileError as exc:
        raise DocumentError(f"{name}: {exc}") from None


def _parse_case(item: dict[str, Any], name: str) -> Case:
    fmt = _object(item, "ev_fmt_profile")
    prof = _object(item, "ev_profile")
    fmt_mode = _mode(fmt, "ev_fmt_profile", _FORMAT_NAMES, FormatMode)
    fmt_fields = _list(fmt, "ev_fmt_profile.fmt_fields", "fmt_fields")
    widths = tuple(
        _integer(
            _object_at(f, f"ev_fmt_profile.fmt_fields[{i}]"),
            "width",
            f"ev_fmt_profile.fmt_fields[{i}]",
        )
        for i, f in enumerate(fmt_fields)
    )
    try:
        check_format(fmt_mode, widths)
    except ProfileError as exc:
        raise ProfileError(f"ev_fmt_profile.{exc.field}", exc.reason) from None
    ev_mode = _mode(prof, "ev_profile", _MODE_NAMES, EvMode)
    if ev_mode is EvMode.AUTO:
        raise ProfileError("ev_profile.ev_mode", "an AUTO profile has no EVs to expand")
    fields = tuple(_field(f, i) for i, f in enumerate(_list(prof, "ev_profile.fields", "fields")))
    try:
        check_fields(widths, fields, ev_mode)
    except ProfileError as exc:
        raise ProfileError(f"ev_profile.{exc.field}", exc.reason) from None
    evs = _evs(prof, fields, ev_mode)
    expanded = []
    for i, (ev, port) in enumerate(evs):
        try:
            expansion = expand(widths, fields, ev)
        except ProfileError as exc:
            raise ProfileError(f"ev_profile.evs[{i}]", exc.reason) from None
        if ev_mode is EvMode.GEN:
            try:
                check_generated(fields, ev, i)
            except ProfileError as exc:
                raise ProfileError(f"ev_profile.{exc.field}", exc.reason) from None
        expanded.append(ExpandedEv(ev, port, expansion))
    return Case(name, fmt_mode, widths, ev_mode, fields, tuple(expanded))


def _evs(
    prof: dict[str, Any], fields: tuple[EvField, ...], mode: EvMode
) -> list[tuple[bytes, int]]:
    raw = prof.get("evs")
    if raw is None:
        if mode is not EvMode.GEN:
            raise ProfileError("ev_profile.evs", "an explicit profile must list its EVs")
        count = _integer(prof, "ev_count", "ev_profile")
        if count > MAX_EVS:
            raise ProfileError("ev_profile.ev_count", f"at most {MAX_EVS}, got {count}")
        seed = _integer(prof, "seed", "ev_profile") if "seed" in prof else 0
        try:
            return [(ev, 1) for ev in generate(fields, count, seed)]
        except ProfileError as exc:
            raise ProfileError(f"ev_profile.{exc.field}", exc.reason) from None
    if not isinstance(raw, list):
        raise ProfileError("ev_profile.evs", "must be a list of hex strings")
    if len(raw) > MAX_EVS:
        raise ProfileError("ev_profile.evs", f"at most {MAX_EVS} EVs, got {len(raw)}")
    out: list[tuple[bytes, int]] = []
    for i, entry in enumerate(raw):
        where = f"ev_profile.evs[{i}]"
        if isinstance(entry, dict):
            ev = parse_ev(entry.get("val"), f"{where}.val")  # type: ignore[arg-type]
            port = _integer(entry, "port", where) if "port" in entry else 1
        else:
            ev, port = parse_ev(entry, where), 1  # type: ignore[arg-type]
        if not 1 <= port <= 255:
            raise ProfileError(f"{where}.port", f"ports are 1-255, got {port}")
        out.append((ev, port))
    return out


def _field(raw: object, index: int) -> EvField:
    where = f"ev_profile.fields[{index}]"
    entry = _object_at(raw, where)
    unknown = sorted(set(entry) - set(_FIELD_KEYS))
    if unknown:
        raise ProfileError(
            f"{where}.{unknown[0]}", f"unknown key (expected {', '.join(_FIELD_KEYS)})"
        )
    values = {
        key: _integer(entry, key, where) if key in entry or key == "width" else 0
        for key in _FIELD_KEYS
    }
    return EvField(**values)


def _object(parent: dict[str, Any], key: str) -> dict[str, Any]:
    if key not in parent:
        raise ProfileError(key, "missing")
    return _object_at(parent[key], key)


def _object_at(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProfileError(where, "expected a JSON object")
    return value


def _list(parent: dict[str, Any], where: str, key: str) -> list[Any]:
    value = parent.get(key)
    if not isinstance(value, list):
        raise ProfileError(where, "missing, or not a list")
    return value


def _integer(parent: dict[str, Any], key: str, where: str) -> int:
    if key not in parent:
        raise ProfileError(f"{where}.{key}", "missing")
    value = parent[key]
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise ProfileError(f"{where}.{key}", f"{parent[key]!r} is not a number") from None
    if type(value) is not int or not 0 <= value <= 0xFFFFFFFF:
        raise ProfileError(f"{where}.{key}", f"must be a 32-bit unsigned integer, got {value!r}")
    return value


def _mode(parent: dict[str, Any], where: str, names: dict[str, Any], enum: type) -> Any:
    key = "ev_fmt_mode" if where == "ev_fmt_profile" else "ev_mode"
    if key in parent and "type" in parent and parent[key] != parent["type"]:
        raise ProfileError(f"{where}.{key}", f"disagrees with 'type' ({parent['type']!r})")
    if key not in parent and "type" not in parent:
        raise ProfileError(f"{where}.{key}", "missing")
    value = parent.get(key, parent.get("type"))
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum(value)
        except ValueError:
            pass
    if isinstance(value, str) and value.upper() in names:
        return names[value.upper()]
    raise ProfileError(f"{where}.{key}", f"{value!r} is not one of {', '.join(sorted(set(names)))}")
