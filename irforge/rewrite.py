"""The one rewrite engine: patterns applied by a greedy worklist driver.

    class FoldAddZero(RewritePattern):
        op_name = "tensor.elementwise"
        def match_and_rewrite(self, op, rw):
            if ...:
                rw.replace_op(op, [op.operands[0]])
                return True
            return False

    apply_patterns(module, [FoldAddZero()])

The driver visits every op, tries the patterns that name it (or all, for `op_name = None`) in order of benefit,
and when one applies re-queues what the rewrite touched (new ops, users of replaced values, defining ops of
dropped operands). It stops when nothing applies; if it is still changing after `max_iterations` full sweeps, or
one sweep fires more than `max_iterations` times per op, it raises, naming the pattern that kept firing, rather
than loop forever.
"""

from __future__ import annotations

from collections.abc import Sequence

from .diagnostics import error
from .ir import Operation, OpResult, Value


class Rewriter:
    """IR edits that keep the driver informed. Usable on its own (without a driver) as a plain edit API."""

    def __init__(self):
        self.changed = False
        self._listener = None

    def _notify(self, op: Operation) -> None:
        self.changed = True
        if self._listener is not None:
            self._listener(op)

    def insert_before(self, anchor: Operation, *ops: Operation) -> None:
        anchor.parent.insert_before(anchor, *ops)
        for op in ops:
            self._notify(op)

    def insert_after(self, anchor: Operation, *ops: Operation) -> None:
        anchor.parent.insert_after(anchor, *ops)
        for op in ops:
            self._notify(op)

    def replace_all_uses(self, old: Value, new: Value) -> None:
        users = old.users
        old.replace_all_uses_with(new)
        for u in users:
            self._notify(u)

    def replace_op(self, op: Operation, new: Sequence[Value] | Sequence[Operation] | Operation) -> None:
        """Replace `op` by new ops (inserted before it; their results replace its results) or by existing values."""
        if isinstance(new, Operation):
            new = [new]
        new = list(new)
        if new and isinstance(new[0], Operation):
            self.insert_before(op, *new)
            values = [r for o in new for r in o.results][-len(op.results) :] if op.results else []
        else:
            values = new
        if len(values) != len(op.results):
            raise ValueError(f"replacing {op.name}: {len(op.results)} result(s) but {len(values)} replacement(s)")
        for old, v in zip(op.results, values):
            if v.name_hint is None and old.name_hint is not None:
                v.name_hint = old.name_hint
            self.replace_all_uses(old, v)
        self.erase_op(op)

    def erase_op(self, op: Operation) -> None:
        defs = [v.op for v in op.operands if isinstance(v, OpResult)]
        op.erase()
        self.changed = True
        for d in defs:
            if d.parent is not None:
                self._notify(d)

    def modified(self, op: Operation) -> None:
        """Say that `op` was changed in place (attributes, operands)."""
        self._notify(op)


class RewritePattern:
    op_name: str | None = None  # the op this pattern looks at; None: every op
    benefit: int = 1

    def match_and_rewrite(self, op: Operation, rw: Rewriter) -> bool:
        raise NotImplementedError


def is_trivially_dead(op: Operation) -> bool:
    return op.has_trait("pure") and all(not r.uses for r in op.results) and not op.regions


def apply_patterns(
    root: Operation, patterns: Sequence[RewritePattern], *, max_iterations: int = 10, fold_dead: bool = True
) -> bool:
    """Apply `patterns` under `root` until none applies. Returns whether anything changed."""
    by_name: dict[str | None, list[RewritePattern]] = {}
    for p in sorted(patterns, key=lambda p: -p.benefit):
        by_name.setdefault(p.op_name, []).append(p)
    generic = by_name.get(None, [])

    rw = Rewriter()
    worklist: list[Operation] = []
    queued: set[int] = set()

    def push(op: Operation) -> None:
        if id(op) not in queued:
            queued.add(id(op))
            worklist.append(op)

    rw._listener = push
    any_change = False
    last_fired = None
    for sweep in range(max_iterations):
        rw.changed = False
        for op in root.walk(post_order=True):
            if op is not root:
                push(op)
        worklist.reverse()  # pop() then visits in post-order: producers before consumers
        # A pattern that re-queues what it rewrites could keep one sweep going forever; a sweep may fire at most
        # `max_iterations` times per op it started with.
        budget = max_iterations * (len(worklist) + 1)
        while worklist:
            if budget <= 0:
                raise error(
                    f"rewrite patterns did not converge in sweep {sweep + 1} (last to fire: {last_fired})", root.loc
                )
            op = worklist.pop()
            queued.discard(id(op))
            if op.parent is None or not _under(op, root):
                continue
            if fold_dead and is_trivially_dead(op):
                rw.erase_op(op)
                continue
            for p in by_name.get(op.name, []) + generic:
                if p.match_and_rewrite(op, rw):
                    last_fired = type(p).__name__
                    budget -= 1
                    break
        if not rw.changed:
            return any_change
        any_change = True
    raise error(
        f"rewrite patterns did not converge after {max_iterations} sweeps (last to fire: {last_fired})", root.loc
    )


def _under(op: Operation, root: Operation) -> bool:
    cur = op.parent_op
    while cur is not None:
        if cur is root:
            return True
        cur = cur.parent_op
    return False
