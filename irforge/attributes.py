"""Attribute values: immutable, hashable, and mostly plain Python.

| kind            | Python value              | text                              |
|-----------------|---------------------------|-----------------------------------|
| integer         | `int`                     | `42`, `-7`                        |
| float           | `float`                   | `1e-06`, `2.0`, `inf`, `nan`      |
| boolean         | `bool`                    | `true`, `false`                   |
| string          | `str`                     | `"any \\"text\\" ✓"`             |
| unit (presence) | `UNIT`                    | `unit`, or a bare key in a dict   |
| none (absence)  | `None`                    | `none` (an argument left out, as in Python's calls) |
| list            | `tuple`                   | `[1, 2, 3]`                       |
| dictionary      | `DictAttr`                | `{bn = 64, name = "x"}`           |
| type            | `Type`                    | `f32[2,3]`                        |
| symbol          | `SymbolRef`               | `@weight`                         |
| index map       | `AffineMap`               | `affine_map<(d0, d1) -> (d1, d0)>` |

Because `True == 1` and `0.0 == -0.0` in Python, structural comparison goes through `attr_key`, which tags every
value with its kind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .index_expr import AffineMap
from .types import DialectType, FunctionType, Type


class _Unit:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNIT"

    def __reduce__(self):
        return "UNIT"


UNIT = _Unit()


@dataclass(frozen=True, slots=True)
class SymbolRef:
    name: str

    def __str__(self) -> str:
        from .printer import format_symbol

        return format_symbol(self.name)


class DictAttr(Mapping):
    """An immutable, hashable mapping from string keys to attributes, kept sorted by key."""

    __slots__ = ("_hash", "_items", "_map")

    def __init__(self, items=()):
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items = tuple(sorted(((k, to_attr(v)) for k, v in pairs), key=lambda kv: kv[0]))
        self._map = dict(self._items)
        self._hash = None

    def __getitem__(self, key):
        return self._map[key]

    def __iter__(self):
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(attr_key(self))
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, DictAttr) and attr_key(self) == attr_key(other)

    def __repr__(self) -> str:
        return f"DictAttr({dict(self._items)!r})"

    def set(self, key: str, value) -> DictAttr:
        return DictAttr({**self._map, key: value})


def to_attr(value):
    """Normalise a Python value to an attribute: lists become tuples, dicts `DictAttr`; anything else is checked."""
    if value is None or isinstance(value, (bool, int, float, str, Type, SymbolRef, AffineMap, DictAttr, _Unit)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(to_attr(v) for v in value)
    if isinstance(value, Mapping):
        return DictAttr(value)
    raise TypeError(f"not an attribute value: {value!r} ({type(value).__name__})")


def attr_key(value):
    """A hashable key that distinguishes what Python's `==` conflates (`True`/`1`, `0.0`/`-0.0`, nan)."""
    if value is None:
        return ("n",)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, tuple):
        return ("l", tuple(attr_key(v) for v in value))
    if isinstance(value, DictAttr):
        return ("d", tuple((k, attr_key(v)) for k, v in value._items))
    if isinstance(value, DialectType):  # parameters are attributes: compare them as such
        return ("t", value.name, tuple(attr_key(p) for p in value.params))
    if isinstance(value, FunctionType):
        return ("fn", tuple(attr_key(t) for t in value.inputs), tuple(attr_key(t) for t in value.outputs))
    return (type(value).__name__, value)
