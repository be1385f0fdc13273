"""Index expressions and index maps: affine arithmetic plus floor/ceil division, modulo, min and max.

They describe how an output coordinate reaches an input coordinate (broadcast, transpose, reshape, slice), and the
addresses of loads and stores at the lower levels. Leaves are constants and dimensions `Dim(i)`; a dimension is
printed `d<i>` inside an `affine_map<...>`, or as the SSA value it stands for in an op's custom syntax.

Python operators build simplified expressions (`d0 * 64 + d1`, `e // 4`, `e % 4`); the node constructors build
exactly what they are given, which is what the parser needs to round-trip text.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar


class IndexExpr:
    __slots__ = ()
    prec: ClassVar[int] = 3  # 1: + -   2: * floordiv ceildiv mod   3: leaves, calls, parentheses

    # Operators simplify as they build.
    def __add__(self, o):
        return add(self, o)

    def __radd__(self, o):
        return add(o, self)

    def __sub__(self, o):
        return add(self, mul(o, -1))

    def __rsub__(self, o):
        return add(o, mul(self, -1))

    def __mul__(self, o):
        return mul(self, o)

    def __rmul__(self, o):
        return mul(o, self)

    def __floordiv__(self, o):
        return floordiv(self, o)

    def __mod__(self, o):
        return mod(self, o)

    def __neg__(self):
        return mul(self, -1)

    def children(self) -> tuple[IndexExpr, ...]:
        return ()

    def rebuild(self, kids) -> IndexExpr:
        return self

    def evaluate(self, dims):
        """Value for `dims[i]` bound to `Dim(i)`; entries may be ints or integer numpy arrays."""
        raise NotImplementedError

    def substitute(self, repl) -> IndexExpr:
        """Replace `Dim(i)` by `repl[i]` (a sequence or mapping of expressions), simplifying as it goes."""
        if isinstance(self, Dim):
            return as_expr(repl[self.index])
        return _SIMPLIFY[type(self)](*(k.substitute(repl) for k in self.children())) if self.children() else self

    def dims(self) -> frozenset[int]:
        if isinstance(self, Dim):
            return frozenset((self.index,))
        return frozenset().union(*(k.dims() for k in self.children()))

    def format(self, leaf=lambda i: f"d{i}") -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True, slots=True)
class Const(IndexExpr):
    value: int

    def evaluate(self, dims):
        return self.value

    def format(self, leaf=lambda i: f"d{i}") -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True)
class Dim(IndexExpr):
    index: int

    def evaluate(self, dims):
        return dims[self.index]

    def format(self, leaf=lambda i: f"d{i}") -> str:
        return leaf(self.index)


@dataclass(frozen=True, slots=True)
class _Binary(IndexExpr):
    lhs: IndexExpr
    rhs: IndexExpr
    symbol: ClassVar[str]

    def children(self):
        return (self.lhs, self.rhs)

    def rebuild(self, kids):
        return type(self)(*kids)

    def format(self, leaf=lambda i: f"d{i}") -> str:
        # Left-associative grammar: parenthesise a right operand of equal precedence.
        lhs = self.lhs.format(leaf)
        rhs = self.rhs.format(leaf)
        if self.lhs.prec < self.prec:
            lhs = f"({lhs})"
        if self.rhs.prec <= self.prec:
            rhs = f"({rhs})"
        return f"{lhs} {self.symbol} {rhs}"


class Add(_Binary):
    __slots__ = ()
    prec, symbol = 1, "+"

    def evaluate(self, dims):
        return self.lhs.evaluate(dims) + self.rhs.evaluate(dims)


class Sub(_Binary):
    __slots__ = ()
    prec, symbol = 1, "-"

    def evaluate(self, dims):
        return self.lhs.evaluate(dims) - self.rhs.evaluate(dims)


class Mul(_Binary):
    __slots__ = ()
    prec, symbol = 2, "*"

    def evaluate(self, dims):
        return self.lhs.evaluate(dims) * self.rhs.evaluate(dims)


class FloorDiv(_Binary):
    __slots__ = ()
    prec, symbol = 2, "floordiv"

    def evaluate(self, dims):
        return self.lhs.evaluate(dims) // self.rhs.evaluate(dims)


class CeilDiv(_Binary):
    __slots__ = ()
    prec, symbol = 2, "ceildiv"

    def evaluate(self, dims):
        return -(-self.lhs.evaluate(dims) // self.rhs.evaluate(dims))


class Mod(_Binary):
    __slots__ = ()
    prec, symbol = 2, "mod"

    def evaluate(self, dims):
        return self.lhs.evaluate(dims) % self.rhs.evaluate(dims)


class _Call(_Binary):
    __slots__ = ()
    prec = 3

    def format(self, leaf=lambda i: f"d{i}") -> str:
        return f"{self.symbol}({self.lhs.format(leaf)}, {self.rhs.format(leaf)})"


class Min(_Call):
    __slots__ = ()
    symbol = "min"

    def evaluate(self, dims):
        a, b = self.lhs.evaluate(dims), self.rhs.evaluate(dims)
        if isinstance(a, int) and isinstance(b, int):  # stay exact (numpy would wrap at 64 bits)
            return min(a, b)
        import numpy as np

        return np.minimum(a, b)


class Max(_Call):
    __slots__ = ()
    symbol = "max"

    def evaluate(self, dims):
        a, b = self.lhs.evaluate(dims), self.rhs.evaluate(dims)
        if isinstance(a, int) and isinstance(b, int):  # stay exact (numpy would wrap at 64 bits)
            return max(a, b)
        import numpy as np

        return np.maximum(a, b)


BINARY_BY_SYMBOL = {c.symbol: c for c in (Add, Sub, Mul, FloorDiv, CeilDiv, Mod, Min, Max)}


def as_expr(x) -> IndexExpr:
    if isinstance(x, IndexExpr):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return Const(x)
    raise TypeError(f"not an index expression: {x!r}")


def _const(e: IndexExpr) -> int | None:
    return e.value if isinstance(e, Const) else None


def add(a, b) -> IndexExpr:
    a, b = as_expr(a), as_expr(b)
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(ca + cb)
    if ca == 0:
        return b
    if cb == 0:
        return a
    if ca is not None:  # constants to the right
        a, b, cb = b, a, ca
    if cb is not None and isinstance(a, Add) and isinstance(a.rhs, Const):
        return add(a.lhs, a.rhs.value + cb)
    return Add(a, b)


def mul(a, b) -> IndexExpr:
    a, b = as_expr(a), as_expr(b)
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(ca * cb)
    if ca is not None:
        a, b, cb = b, a, ca
    if cb == 0:
        return Const(0)
    if cb == 1:
        return a
    if cb is not None and isinstance(a, Mul) and isinstance(a.rhs, Const):
        return mul(a.lhs, a.rhs.value * cb)
    return Mul(a, b)


def floordiv(a, b) -> IndexExpr:
    a, b = as_expr(a), as_expr(b)
    ca, cb = _const(a), _const(b)
    if cb == 0:
        raise ZeroDivisionError("index expression divides by zero")
    if ca is not None and cb is not None:
        return Const(ca // cb)
    if cb == 1:
        return a
    return FloorDiv(a, b)


def ceildiv(a, b) -> IndexExpr:
    a, b = as_expr(a), as_expr(b)
    ca, cb = _const(a), _const(b)
    if cb == 0:
        raise ZeroDivisionError("index expression divides by zero")
    if ca is not None and cb is not None:
        return Const(-(-ca // cb))
    if cb == 1:
        return a
    return CeilDiv(a, b)


def mod(a, b) -> IndexExpr:
    a, b = as_expr(a), as_expr(b)
    ca, cb = _const(a), _const(b)
    if cb == 0:
        raise ZeroDivisionError("index expression takes a modulo by zero")
    if ca is not None and cb is not None:
        return Const(ca % cb)
    if cb == 1:
        return Const(0)
    return Mod(a, b)


def minimum(a, b) -> IndexExpr:
    a, b = as_expr(a), as_expr(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(min(a.value, b.value))
    return a if a == b else Min(a, b)


def maximum(a, b) -> IndexExpr:
    a, b = as_expr(a), as_expr(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(max(a.value, b.value))
    return a if a == b else Max(a, b)


def sub(a, b) -> IndexExpr:
    return add(a, mul(b, -1))


_SIMPLIFY = {
    Add: add,
    Sub: sub,
    Mul: mul,
    FloorDiv: floordiv,
    CeilDiv: ceildiv,
    Mod: mod,
    Min: minimum,
    Max: maximum,
}


def bad_division(e: IndexExpr) -> IndexExpr | None:
    """The first `floordiv`, `ceildiv` or `mod` in `e` whose divisor is not a positive constant (as in MLIR's
    affine maps: the generated C divides with `/` and `%`, which agree with them only for such divisors)."""
    if isinstance(e, (FloorDiv, CeilDiv, Mod)) and not (isinstance(e.rhs, Const) and e.rhs.value > 0):
        return e
    for k in e.children():
        found = bad_division(k)
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class AffineMap:
    """`(d0, ..., d{n-1}) -> (e0, ..., e{m-1})`: maps n coordinates to m coordinates."""

    num_dims: int
    results: tuple[IndexExpr, ...]

    def __post_init__(self):
        for r in self.results:
            bad = [d for d in r.dims() if d >= self.num_dims]
            if bad:
                raise ValueError(f"affine map uses d{max(bad)} but has only {self.num_dims} dimensions")
            div = bad_division(r)
            if div is not None:
                raise ValueError(f"'{div}' divides by {div.rhs}: divisors must be positive constants")

    @staticmethod
    def identity(n: int) -> AffineMap:
        return AffineMap(n, tuple(Dim(i) for i in range(n)))

    def compose(self, inner: AffineMap) -> AffineMap:
        """`self ∘ inner`: first `inner`, then `self` (inner's results feed self's dimensions)."""
        if inner.num_dims is None or len(inner.results) != self.num_dims:
            raise ValueError(f"cannot compose a {self.num_dims}-d map after one with {len(inner.results)} results")
        return AffineMap(inner.num_dims, tuple(r.substitute(inner.results) for r in self.results))

    def evaluate(self, coords) -> tuple:
        return tuple(r.evaluate(coords) for r in self.results)

    @property
    def is_identity(self) -> bool:
        return self.results == tuple(Dim(i) for i in range(self.num_dims))

    def __str__(self) -> str:
        dims = ", ".join(f"d{i}" for i in range(self.num_dims))
        return f"affine_map<({dims}) -> ({', '.join(r.format() for r in self.results)})>"


# ---- ranges and range-aware simplification ----------------------------------------------------------------------
def value_range(e: IndexExpr, extents) -> tuple[int, int] | None:
    """The least and greatest value of `e` when each `Dim(i)` ranges over `0 .. extents[i] - 1` (None: unbounded).

    Interval arithmetic: exact for sums of distinct dimensions, conservative (wider) when a dimension repeats.
    """
    if isinstance(e, Const):
        return (e.value, e.value)
    if isinstance(e, Dim):
        return (0, max(extents[e.index] - 1, 0))
    kids = [value_range(k, extents) for k in e.children()]
    if any(k is None for k in kids):
        return None
    (alo, ahi), (blo, bhi) = kids
    if isinstance(e, Add):
        return (alo + blo, ahi + bhi)
    if isinstance(e, Sub):
        return (alo - bhi, ahi - blo)
    if isinstance(e, Mul):
        ps = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
        return (min(ps), max(ps))
    if isinstance(e, (FloorDiv, CeilDiv)):
        if blo <= 0 <= bhi:
            return None
        div = (lambda x, y: x // y) if isinstance(e, FloorDiv) else (lambda x, y: -(-x // y))
        qs = (div(alo, blo), div(alo, bhi), div(ahi, blo), div(ahi, bhi))
        return (min(qs), max(qs))
    if isinstance(e, Mod):
        if blo <= 0:
            return None
        if alo >= 0 and ahi < blo:
            return (alo, ahi)
        return (0, bhi - 1)
    if isinstance(e, Min):
        return (min(alo, blo), min(ahi, bhi))
    if isinstance(e, Max):
        return (max(alo, blo), max(ahi, bhi))
    return None


def _linear(e: IndexExpr) -> tuple[dict[IndexExpr, int], int]:
    """`e` as {atom: coefficient} plus a constant, where atoms are the non-linear leaves (dims, div, mod, ...)."""
    if isinstance(e, Const):
        return {}, e.value
    if isinstance(e, (Add, Sub)):
        (ta, ca), (tb, cb) = _linear(e.lhs), _linear(e.rhs)
        sign = 1 if isinstance(e, Add) else -1
        terms = dict(ta)
        for atom, k in tb.items():
            terms[atom] = terms.get(atom, 0) + sign * k
        return {a: k for a, k in terms.items() if k}, ca + sign * cb
    if isinstance(e, Mul) and (isinstance(e.lhs, Const) or isinstance(e.rhs, Const)):
        k, inner = (e.lhs.value, e.rhs) if isinstance(e.lhs, Const) else (e.rhs.value, e.lhs)
        terms, c = _linear(inner)
        return {a: k * v for a, v in terms.items() if k * v}, k * c
    return {e: 1}, 0


def split_terms(e: IndexExpr, rank) -> list[IndexExpr]:
    """`e`'s linear terms grouped by `rank(atom)` (an int; groups in ascending rank), each group an expression and
    the constant in the last: the parts sum to `e`. An address printed as `base + part0 + part1 ...` with its
    loop-invariant parts first lets the CUDA compiler hoist them (one sum of 32-bit terms is widened to 64 bits
    whole, each time)."""
    terms, const = _linear(e)
    groups: dict[int, dict[IndexExpr, int]] = {}
    for atom, k in terms.items():
        groups.setdefault(rank(atom), {})[atom] = k
    parts = [_rebuild(groups[r], 0) for r in sorted(groups)]
    if not parts:
        return [Const(const)] if const else []
    last = sorted(groups)[-1]
    parts[-1] = _rebuild(groups[last], const)
    return parts


def scaled(e: IndexExpr, k: int) -> IndexExpr:
    """`e * k` with `k` distributed over `e`'s linear terms, so its constant part stays one constant (an address
    `base + 2 * (x + 8)` prints as `base + x * 2 + 16`, an immediate offset to the CUDA compiler)."""
    if k == 1:
        return e
    terms, const = _linear(e)
    return _rebuild({a: c * k for a, c in terms.items()}, const * k)


def _atom_key(a: IndexExpr):
    ds = a.dims()
    return (min(ds) if ds else -1, not isinstance(a, Dim), str(a))


def _rebuild(terms: dict[IndexExpr, int], const: int) -> IndexExpr:
    # (x floordiv c) * k*c + (x mod c) * k  ==  x * k
    for atom in list(terms):
        if isinstance(atom, Mod) and isinstance(atom.rhs, Const) and atom in terms:
            fd = FloorDiv(atom.lhs, atom.rhs)
            k = terms[atom]
            if terms.get(fd) == k * atom.rhs.value:
                del terms[atom], terms[fd]
                inner, c = _linear(atom.lhs)
                for a, v in inner.items():
                    terms[a] = terms.get(a, 0) + k * v
                const += k * c
                terms = {a: v for a, v in terms.items() if v}
                return _rebuild(terms, const)
    # positive terms, then a positive constant, then what is subtracted: `d0 * 4 + d1 + 3 - d2`, `5 - d0`
    atoms = sorted(terms, key=_atom_key)
    out: IndexExpr | None = None
    for atom in (a for a in atoms if terms[a] > 0):
        term = mul(atom, terms[atom])
        out = term if out is None else Add(out, term)
    if const > 0 or (out is None and const != 0 and not terms):
        out = Const(const) if out is None else Add(out, Const(const))
    for atom in (a for a in atoms if terms[a] < 0):
        term = mul(atom, -terms[atom])
        out = mul(term, -1) if out is None else Sub(out, term)
    if const < 0 and out is not None and not isinstance(out, Const):
        out = Sub(out, Const(-const))
    return out if out is not None else Const(0)


def simplify(e: IndexExpr, extents) -> IndexExpr:
    """An equivalent expression for every point where `Dim(i)` is in `0 .. extents[i] - 1`, using those ranges.

    Folds what the ranges decide (`(d0 * 4 + d1) floordiv 4 -> d0` when d1 < 4, `d1 mod 8 -> d1` when d1 < 8,
    `min(d0, 7) -> d0` when d0 < 8, a dimension of extent 1 -> 0), merges `(x floordiv c) * c + x mod c -> x`,
    and orders sums by dimension.

    Remembered: expressions are values and the answer depends on nothing else, and passes simplify the same few
    subscripts thousands of times (fusion re-simplifies each trial's whole kernel).
    """
    if isinstance(extents, (list, tuple)):
        return _simplify_cached(e, tuple(extents))
    return _simplify(e, extents)


@functools.lru_cache(maxsize=1 << 14)
def _simplify_cached(e: IndexExpr, extents: tuple) -> IndexExpr:
    return _simplify(e, extents)


def _simplify(e: IndexExpr, extents) -> IndexExpr:
    if isinstance(e, Dim):
        return Const(0) if extents[e.index] == 1 else e
    if isinstance(e, Const):
        return e
    kids = [simplify(k, extents) for k in e.children()]
    e = _SIMPLIFY[type(e)](*kids)
    if not e.children():
        return e
    r = value_range(e, extents)
    if r is not None and r[0] == r[1]:
        return Const(r[0])
    if isinstance(e, (Add, Sub, Mul)):
        terms, c = _linear(e)
        return _rebuild(terms, c)
    a, b = e.lhs, e.rhs
    ra, rb = value_range(a, extents), value_range(b, extents)
    if isinstance(e, (Min, Max)) and ra is not None and rb is not None:
        if isinstance(e, Min):
            return a if ra[1] <= rb[0] else b if rb[1] <= ra[0] else e
        return a if ra[0] >= rb[1] else b if rb[0] >= ra[1] else e
    if not (isinstance(b, Const) and b.value > 0):
        return e
    c = b.value
    if isinstance(e, FloorDiv) and isinstance(a, FloorDiv) and isinstance(a.rhs, Const) and a.rhs.value > 0:
        return simplify(FloorDiv(a.lhs, Const(a.rhs.value * c)), extents)
    if isinstance(e, Mod) and isinstance(a, Mod) and isinstance(a.rhs, Const) and a.rhs.value % c == 0:
        return simplify(Mod(a.lhs, b), extents)
    if isinstance(e, (FloorDiv, Mod)):
        terms, const = _linear(a)
        whole = {t: k // c for t, k in terms.items() if k % c == 0}
        rest = {t: k for t, k in terms.items() if k % c != 0}
        rest_expr = _rebuild(rest, const % c)
        rr = value_range(rest_expr, extents)
        if isinstance(e, Mod):
            if rr is not None and 0 <= rr[0] and rr[1] < c:
                return rest_expr
            split = _scaled_split(terms, const, c, extents)
            if split is not None:  # (k * q + s) mod (k * m) = (q mod m) * k + s
                k, q, small = split
                return simplify(add(mul(Mod(q, Const(c // k)), k), small), extents)
            return Mod(rest_expr, b) if whole or const % c != const else e
        quotient = _rebuild(whole, const // c)
        if rr is not None and rr[0] // c == rr[1] // c:
            return add(quotient, rr[0] // c)
        split = _scaled_split(terms, const, c, extents)
        if split is not None:  # (k * q + s) floordiv (k * m) = q floordiv m
            k, q, _ = split
            return simplify(FloorDiv(q, Const(c // k)), extents)
        return add(quotient, FloorDiv(rest_expr, b)) if whole or const // c else e
    return e


def _scaled_split(terms: dict, const: int, c: int, extents):
    """`a = k * q + s` with k a proper divisor of c (> 1) and 0 <= s < k everywhere, for the largest such k.

    Then `a floordiv c = q floordiv (c / k)` and `a mod c = (q mod (c / k)) * k + s`: what lets a reshape that
    splits and merges dimensions (`(d1 * 176 + d3 * 16 + d4) floordiv 352` with d3 * 16 + d4 < 176) simplify.
    """
    if c > 1 << 24:
        return None
    divisors = sorted({d for i in range(2, int(c**0.5) + 1) if c % i == 0 for d in (i, c // i)} - {c}, reverse=True)
    for k in divisors:
        big = {t: v // k for t, v in terms.items() if v % k == 0}
        if not big:
            continue
        small = _rebuild({t: v for t, v in terms.items() if v % k != 0}, const)
        r = value_range(small, extents)
        if r is not None and 0 <= r[0] and r[1] < k:
            return k, _rebuild(big, 0), small
    return None


def simplify_map(m: AffineMap, extents) -> AffineMap:
    """`simplify` applied to each result of `m`, with `extents` the ranges of its dimensions."""
    return AffineMap(m.num_dims, tuple(simplify(r, extents) for r in m.results))
