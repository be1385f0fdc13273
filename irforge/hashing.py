"""Structural identity of IR: equal up to value names and locations.

Two ops are structurally equal when they have the same names, attributes (compared by kind, see `attr_key`),
types and regions, and their operands refer to values in the same positions. Values are numbered in definition
order; a value defined outside the compared op is numbered by first use. `structural_hash` is a stable hex digest
of the same canonical form, for caches keyed by kernel (the tuning database).
"""

from __future__ import annotations

import hashlib

from .attributes import attr_key
from .ir import Operation


def _canonical(op: Operation) -> list:
    numbers: dict = {}
    out: list = []

    def num(v) -> int:
        n = numbers.get(v)
        if n is None:
            n = numbers[v] = len(numbers)
        return n

    def visit(o: Operation) -> None:
        out.append(
            (
                o.name,
                tuple(("v", num(v)) for v in o.operands),
                tuple(str(r.type) for r in o.results),
                tuple(sorted((k, attr_key(v)) for k, v in o.attributes.items())),
                len(o.regions),
            )
        )
        for r in o.results:
            num(r)
        for region in o.regions:
            out.append(("region", len(region.blocks)))
            for block in region.blocks:
                out.append(("block", tuple(str(a.type) for a in block.args), tuple(num(a) for a in block.args)))
                for inner in block.ops:
                    visit(inner)
                out.append(("end",))

    visit(op)
    return out


def structurally_equal(a: Operation, b: Operation) -> bool:
    return _canonical(a) == _canonical(b)


def structural_hash(op: Operation) -> str:
    return hashlib.sha256(repr(_canonical(op)).encode()).hexdigest()
