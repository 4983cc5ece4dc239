"""How the experiments' result types are written into summary.json and timeseries.json.

Results travel between the runner and the experiments as frozen dataclasses; :func:`to_json`
writes one as the JSON the results directory has always held, so readers of those files
(tools, tests, a reader's scripts) see the same keys. A field's name is its key, and its
metadata says where the JSON's shape differs from the type's:

* ``FLAT``: the field's own fields (a dataclass) or items (a mapping) stand in the parent
  object, as when a record carries its mode's ``transport`` and ``routing`` beside its
  figures; a flat field that is None writes nothing;
* ``OMIT_NONE``: the key is left out when the value is None (a figure only some runs have);
* ``PREFIXED``: a :class:`experiments.stats.Spread` (any dataclass) written as
  ``<key>_mean``, ``<key>_min``, ... in the parent object;
* ``TEXT``: written as ``str(value)``, items of a sequence or values of a mapping each (a
  mode in a list of modes, a routing policy, a seed number kept as a string);
* ``key(name)``: another key than the field's name (two fields whose keys would clash).

Mapping keys are written with ``str()``: a mode's label, a seed's number. Enums are written
as their values, tuples as lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: A JSON document as :func:`json.dumps` takes it.
Json: TypeAlias = bool | int | float | str | Sequence["Json"] | Mapping[str, "Json"] | None

FLAT: Mapping[str, object] = {"json": "flat"}
OMIT_NONE: Mapping[str, object] = {"json": "omit_none"}
PREFIXED: Mapping[str, object] = {"json": "prefixed"}
TEXT: Mapping[str, object] = {"json": "text"}


def key(name: str, form: Mapping[str, object] | None = None) -> Mapping[str, object]:
    """Metadata writing a field under ``name`` (with ``form``'s rule, e.g. ``PREFIXED``)."""
    return {**(form or {}), "key": name}


def to_json(value: object) -> Json:
    """``value`` as JSON (see the module's docstring for the rules)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Enum):
        return to_json(value.value)
    if isinstance(value, str):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _object(value)
    if isinstance(value, Mapping):
        return {str(name): to_json(item) for name, item in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [to_json(item) for item in value]
    raise TypeError(f"no JSON form for {type(value).__name__}: {value!r}")


def _object(value: DataclassInstance) -> dict[str, Json]:
    written: dict[str, Json] = {}
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        name = str(field.metadata.get("key", field.name))
        form = field.metadata.get("json")
        if form == "flat":
            if item is not None:
                inner = to_json(item)
                if not isinstance(inner, dict):
                    raise TypeError(f"{field.name}: a flat field must write an object")
                written.update(inner)
        elif form == "omit_none":
            if item is not None:
                written[name] = to_json(item)
        elif form == "prefixed":
            inner = to_json(item)
            if not isinstance(inner, dict):
                raise TypeError(f"{field.name}: a prefixed field must write an object")
            written.update((f"{name}_{suffix}", figure) for suffix, figure in inner.items())
        elif form == "text":
            written[name] = _text(item)
        else:
            written[name] = to_json(item)
    return written


def _text(value: object) -> Json:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {str(name): _text(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_text(item) for item in value]
    return str(value)
