"""IR types: immutable, hashable values.

Core types are scalars (`f32`, `bf16`, `i64`, `bool`, `index`, ...) and statically shaped tensors (`f32[1,32,2048]`,
`f32[]` for rank 0). Lower levels add their own types (pointers with a memory space, shared-memory buffers, register
fragments) by subclassing `DialectType`; those print generically as `!dialect.name<param, ...>` with attribute
syntax for the parameters, so every type round-trips without a grammar of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar


class Type:
    """Base class of all types."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ScalarType(Type):
    name: str

    def __post_init__(self):
        if self.name not in _SCALAR_INFO:
            raise ValueError(f"unknown scalar type {self.name!r}")

    @property
    def bits(self) -> int:
        return _SCALAR_INFO[self.name][0]

    @property
    def bytes(self) -> int:
        """Bytes an element takes in memory (a bool one)."""
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return _SCALAR_INFO[self.name][1] == "f"

    @property
    def is_int(self) -> bool:
        return _SCALAR_INFO[self.name][1] in "iu"

    @property
    def is_signed(self) -> bool:
        return _SCALAR_INFO[self.name][1] in "fi"

    def as_python(self, value):
        """`value` as the Python number a constant of this type holds: float, bool or int."""
        return float(value) if self.is_float else bool(value) if self.name == "bool" else int(value)

    def holds(self, value) -> bool:
        """Whether an attribute value is a constant of this type as written: a bool for bool, a float for a float
        type, an int (not a bool) for the others."""
        if self.name == "bool":
            return isinstance(value, bool)
        if self.is_float:
            return isinstance(value, float)
        return isinstance(value, int) and not isinstance(value, bool)

    def __str__(self) -> str:
        return self.name


# name -> (bits, kind): kind f = float, i = signed int, u = unsigned int, b = bool, x = index
_SCALAR_INFO = {
    "f64": (64, "f"),
    "f32": (32, "f"),
    "f16": (16, "f"),
    "bf16": (16, "f"),
    "i64": (64, "i"),
    "i32": (32, "i"),
    "i16": (16, "i"),
    "i8": (8, "i"),
    "u8": (8, "u"),
    "bool": (1, "b"),
    "index": (64, "x"),
}
SCALAR_NAMES = tuple(_SCALAR_INFO)

f64, f32, f16, bf16 = (ScalarType(n) for n in ("f64", "f32", "f16", "bf16"))
i64, i32, i16, i8, u8 = (ScalarType(n) for n in ("i64", "i32", "i16", "i8", "u8"))
boolean = ScalarType("bool")
index = ScalarType("index")


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    dtype: ScalarType
    shape: tuple[int, ...]

    def __post_init__(self):
        if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in self.shape):
            raise ValueError(f"tensor dimensions must be non-negative integers, got {self.shape}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def with_shape(self, shape) -> TensorType:
        return TensorType(self.dtype, tuple(shape))

    def with_dtype(self, dtype: ScalarType) -> TensorType:
        return TensorType(dtype, self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


def tensor(dtype: ScalarType | str, *shape: int) -> TensorType:
    return TensorType(ScalarType(dtype) if isinstance(dtype, str) else dtype, tuple(shape))


def element_type(t: Type) -> Type:
    """The scalar type of a tensor, or the type itself."""
    return t.dtype if isinstance(t, TensorType) else t


class DialectType(Type):
    """A type defined by a dialect, printed `!name<p0, p1, ...>`.

    Subclasses are frozen dataclasses whose fields are the parameters (attribute values: ints, strings, types,
    tuples, ...) and set `name`; register them with the dialect so the parser can rebuild them.
    """

    __slots__ = ()
    name: ClassVar[str]

    @property
    def params(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    @classmethod
    def from_params(cls, params: tuple) -> DialectType:
        return cls(*params)

    def __str__(self) -> str:
        from .printer import format_attr

        ps = self.params
        return f"!{self.name}" + (f"<{', '.join(format_attr(p) for p in ps)}>" if ps else "")


@dataclass(frozen=True, slots=True, eq=False)
class OpaqueType(DialectType):
    """A dialect type whose dialect is not loaded: kept verbatim so it still round-trips."""

    type_name: str
    values: tuple

    # Parameters compare as attributes (`nan` equals `nan`, `true` differs from `1`).
    def __eq__(self, other) -> bool:
        from .attributes import attr_key

        return isinstance(other, OpaqueType) and attr_key(self) == attr_key(other)

    def __hash__(self) -> int:
        from .attributes import attr_key

        return hash(attr_key(self))

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.type_name

    @property
    def params(self) -> tuple:
        return self.values


@dataclass(frozen=True, slots=True)
class FunctionType(Type):
    inputs: tuple[Type, ...]
    outputs: tuple[Type, ...]

    def __str__(self) -> str:
        from .printer import format_function_type

        return format_function_type(self.inputs, self.outputs)
