from __future__ import annotations

from irforge.attributes import attr_key
from irforge.ir import Block, Operation
from irforge.pass_manager import Pass


class CommonSubexpressionElimination(Pass):
    """Merge pure ops that compute the same thing from the same operands.

    An op is replaced by an earlier identical one (same name, operands, attributes and result types) that
    dominates it: earlier in the same block, or in an enclosing block below the nearest isolated-from-above op.
    Ops with regions are left alone.
    """

    name = "cse"

    def run(self, op: Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                _cse_block(block, [{}])


def _key(op: Operation):
    return (
        op.name,
        tuple(id(v) for v in op.operands),
        tuple(sorted((k, attr_key(v)) for k, v in op.attributes.items())),
        tuple(r.type for r in op.results),
    )


def _cse_block(block: Block, scopes: list[dict]) -> None:
    scopes.append({})
    for op in list(block.ops):
        if op.has_trait("pure") and not op.regions and op.results:
            key = _key(op)
            prev = next((s[key] for s in reversed(scopes) if key in s), None)
            if prev is not None:
                for old, new in zip(op.results, prev.results):
                    old.replace_all_uses_with(new)
                op.erase()
                continue
            scopes[-1][key] = op
        for region in op.regions:
            for inner in region.blocks:
                _cse_block(inner, [{}] if op.has_trait("isolated") else scopes)
    scopes.pop()
