"""Emission helpers lower-to-kernel's rules share: counted and strided loops, monoid programs on kernel values."""

from __future__ import annotations

from contextlib import contextmanager

from irforge.dialects.kernel.builder import KernelBuilder, Val
from irforge.dialects.kernel.types import element_type

from irforge.ir import Value
from irforge.types import boolean, index

FULL_UNROLL = 8  # uniform strided loops of up to this many trips unroll fully, longer ones by UNROLL
FULL_UNROLL_REGISTERS = 128  # ... and a reduction's few trips only while trips x carried elements stay this few
UNROLL = 4


def value_hint(v: Value) -> str | None:
    hint = v.name_hint
    return hint if hint and not hint.isdigit() else None


@contextmanager
def strided(kb: KernelBuilder, first, count: int, step: int, carries=(), hint: str = "w", unroll=None):
    """A loop over the items `first, first + step, ...` below `count` (0 <= first < step); yields the loop and the
    item. Where `step` divides `count`, every thread makes the same trips: the loop counts them and is unrolled
    (fully up to FULL_UNROLL trips), so the compiler can issue all the trips' loads before the first is used (one
    load in flight per thread cannot cover DRAM latency). Where it does not and there are at most FULL_UNROLL
    trips, the loop counts the most any thread makes, unrolled, each trip guarded by its item being below `count`
    (the carries pass through a trip a thread does not make)."""
    trips = -(-count // step)
    if step > 1 and count % step == 0:
        if unroll is None:
            unroll = 0 if trips <= FULL_UNROLL else UNROLL
        with kb.for_(0, trips, carries=carries, hint="k", unroll=unroll) as lp:
            yield lp, kb.index(Val(lp.iv) * step + first, hint)
    elif step > 1 and trips <= FULL_UNROLL and unroll in (None, 0):
        with kb.for_(0, trips, carries=carries, hint="k", unroll=0) as lp:
            w = kb.index(Val(lp.iv) * step + first, hint)
            inside = kb.scalar("lt", w, kb.const(count, index))
            with kb.if_(inside, [c.type for c in carries]) as br:
                with br.then():
                    yield (_GuardedTrip(lp, br) if carries else lp), w
                if carries:
                    with br.otherwise():
                        br.yield_(*lp.carries)
            if carries:
                lp.yield_(*br.results)
    else:
        with kb.for_(first, count, step=step, carries=carries, hint=hint, unroll=unroll) as lp:
            yield lp, lp.iv


class _GuardedTrip:
    """The loop of a guarded trip, as its body sees it: the loop's carries in, its results out; what the body yields
    is the guard's result (the loop yields that)."""

    def __init__(self, loop, guard):
        self.op, self.iv, self.carries, self.results = loop.op, loop.iv, loop.carries, loop.results
        self._guard = guard

    def yield_(self, *values: Value) -> None:
        self._guard.yield_(*values)


def combine_values(kb: KernelBuilder, monoid, a: list[Value], b: list[Value]) -> list[Value]:
    """The monoid's combine program on two carriers (kernel values; register tiles broadcast)."""
    steps, outputs = monoid.combine_program(len(a))
    env = {f"a{i}": v for i, v in enumerate(a)} | {f"b{i}": v for i, v in enumerate(b)}
    return run_steps(kb, steps, outputs, env, element_type(a[0].type))


def run_steps(kb: KernelBuilder, steps, outputs, env: dict, dtype) -> list[Value]:
    """A monoid program's steps (no `fold:` steps) on kernel values `env`; a constant takes the type of its step's
    other (non-bool) operands, `dtype` where there are none."""
    env = dict(env)
    for st in steps:
        named = [env[x] for x in st.args if isinstance(x, str)]
        typed = next((element_type(v.type) for v in named if element_type(v.type) != boolean), dtype)
        args = [env[x] if isinstance(x, str) else kb.const(float(x), typed) for x in st.args]
        env[st.result] = kb.scalar(st.op, *args)
    return [env[o] for o in outputs]
