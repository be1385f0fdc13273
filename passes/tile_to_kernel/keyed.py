"""lower-to-kernel's rule for a short reduction of a keyed carrier (`Monoid.keyed_program`: the online carrier of
softmax and attention): its elements' keys first, the carrier rescaled once, then the elements' terms.

Folding an online carrier one element after another costs, per element, a max, two exponentials and a rescale of
every sum (an attention row's whole slice of O). A reduction of a few elements (a chunk of keys, the inner loop of
`tile-chunk-reduce`) folds instead in two passes, both unrolled:

1. each element's key (the yield's first component: an attention score, with everything it reads), kept in
   registers, each op for every element before the next (the elements' shuffles independent, their shared loads,
   an attention row's Q slice, together, so the CUDA compiler reads them once), and the join of them all with the
   carrier's key, k (the max, as a tree);
2. the carrier's sums read at k (one rescale), then each element's sums at k added in (exp(x - k) times its
   weights: a V row, fused multiply-adds).

This is the combine of the carrier with the chunk's fold, the monoid's own algebra, the key taken before the sums.
The body is split by what each component reads: the ops the key reads run in the first pass, those the weights read
in the second (both, where they share cheap index and scalar math). It applies where no axis deals the reduction,
no stage sits in it, the keys are few registers (at most KEYED_REGISTERS values) and no costly op feeds both.
Where a mask makes every element the identity (`masked.py`: causal attention's chunks above the diagonal), both
passes sit under one `kernel.if`, the carrier passing through otherwise.
"""

from __future__ import annotations

from contextlib import contextmanager

from irforge.dialects import tile as T
from irforge.dialects.kernel.types import element_type
from irforge.dialects.scalar import CastOp, ConstOp, ScalarMathOp

from irforge.ir import Operation, Value
from irforge.types import TensorType, index

from . import masked
from .emit import run_steps

KEYED_REGISTERS = 32  # the first pass's keys, held until the second: this many values a thread at most
_CHEAP = (ScalarMathOp, ConstOp, CastOp, T.IndexOp)  # recomputed in the second pass where both passes need them


def applies(m, op: T.ReduceOp) -> bool:
    """Whether `op` folds key first (the conditions above)."""
    if op.bind or op.vector > 1 or op.work_items < 1 or len(op.carriers) != 1:
        return False
    if any(isinstance(x, T.StageOp) for x in op.walk()):
        return False
    (monoid, _, results) = op.carriers[0]
    if monoid.keyed_program(len(results)) is None:
        return False
    t = m.tile_type(results[0].type, op.yielded[0], m.lanes)
    if op.work_items * (t.numel if isinstance(t, TensorType) else 1) > KEYED_REGISTERS:
        return False
    return _passes(op) is not None


def _passes(op: T.ReduceOp) -> tuple[list[Operation], list[Operation]] | None:
    """The body's ops the key reads and those the other components read, in order (None where an op is in
    neither, or a costly op in both)."""
    body = [o for o in op.body.ops if not isinstance(o, T.YieldOp)]
    owner = {r: o for o in body for r in o.results}
    reads = {o: {owner[v] for x in o.walk() for v in x.operands if v in owner} for o in body}

    def closure(values) -> set[Operation]:
        seen: set[Operation] = set()
        todo = [owner[v] for v in values if v in owner]
        while todo:
            o = todo.pop()
            if o not in seen:
                seen.add(o)
                todo += reads[o]
        return seen

    key, terms = closure(op.yielded[:1]), closure(op.yielded[1:])
    if any(o not in key and o not in terms for o in body) or any(not isinstance(o, _CHEAP) for o in key & terms):
        return None
    return [o for o in body if o in key], [o for o in body if o in terms]


def fold_chunk(m, op: T.ReduceOp, inits: list[Value]) -> None:
    """Materialize `op` from the carrier `inits` (kernel values) in the two passes."""
    masked.fold_unless_skipped(m, op, inits, _two_passes)


def _two_passes(m, op: T.ReduceOp, inits: list[Value]) -> list[Value]:
    kb = m.kb
    (monoid, _, results) = op.carriers[0]
    join, steps, outputs = monoid.keyed_program(len(results))
    key_ops, term_ops = _passes(op)
    # Op by op, each for every element: the elements' loads of what they share (an attention row's Q slice) then
    # stand together, with no shuffle between them, and the CUDA compiler reads them once for the chunk.
    trips = [dict() for _ in range(op.work_items)]
    for o in key_ops:
        for k, env in enumerate(trips):
            m.env.update(env)
            with _trip(m, op, k):
                m.op(o)
            env.update((r, m.env[r]) for r in o.results)
    keys = []
    for k, env in enumerate(trips):
        m.env.update(env)
        with _trip(m, op, k):
            keys.append(m.get(op.yielded[0]))
    tree = keys
    while len(tree) > 1:  # log2(W) dependent steps, not W
        tree = [kb.scalar(join, a, b) for a, b in zip(tree[::2], tree[1::2])] + tree[len(tree) // 2 * 2 :]
    key = kb.scalar(join, inits[0], tree[0])
    dtype = element_type(inits[0].type)

    def at_key(components: list[Value]) -> list[Value]:
        return run_steps(kb, steps, outputs, {f"a{i}": v for i, v in enumerate(components)} | {"k": key}, dtype)

    sums = at_key(inits)
    for k, x in enumerate(keys):
        with _trip(m, op, k):
            for o in term_ops:
                m.op(o)
            terms = at_key([x, *(m.get(v) for v in op.yielded[1:])])
        sums = [kb.scalar("add", s, t) for s, t in zip(sums, terms)]
    return [key, *sums]


@contextmanager
def _trip(m, op: T.ReduceOp, k: int):
    from .lower_to_kernel import lanes_of

    m.trip[op] = w = m.kb.const(k, index)
    with lanes_of(m, op, w):
        yield
