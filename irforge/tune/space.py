"""The search space of one kernel: the options of the passes that schedule it, read from the registry.

A program is tuned kernel by kernel at the loop level, where kernels are formed and nothing is scheduled yet. Each
loop kernel is *isolated*: a function of its own whose arguments are the buffers it reads and whose results are the
buffers it writes, so it can be lowered, compiled and timed alone, and so that the same kernel in any program (24
identical RMSNorms) has one structural hash (`kernel_key`).

The decisions are every option with a declared domain of every pass the lowering runs on kernels after that point,
in pipeline order (`decisions_of`): no list of knobs lives here, a new pass option is a new decision. A state of
the search has values for a prefix of the decisions and the IR they lead to; `Space.expand` gives a state's
children, one per value of the next decision, after

- **pruning**: a value the pass's own `check` refuses (or that makes the pass fail) is no child. For the pass's last
  option the pass runs with all of them: exact. An earlier option of the pass is tried with the later ones at the
  pipeline's values and, if that is refused, with each later option changed in turn: a value nothing rescues is
  pruned, one that something rescues stays (its subtree decides);
- **merging**: values that leave the same IR (by structural hash) are one child, the explicit value kept (so a
  tuned point means the same after the heuristics change), or the pipeline's own value when the option changes
  nothing here. A value 0 is the heuristic's choice (passes/tile/heuristics.py); the pipeline's values are the
  baseline, the schedule `irforge compile` gives without tuning.

States keep their IR only while they are expanded (it is recomputed from the parent on demand), and for the prior
a small summary (`cost.Features`) of the whole schedule the state leads to with the undecided options at the
pipeline's values (a partly scheduled IR says little: before tile-tensorize runs every point computes on the CUDA
cores). Pass runs are remembered by what went in (`Space._lowered`): rollouts and completions repeat them. A
rollout takes one child at a time (`Space.step`: one pass run, no
siblings, no merging; `Space.finish` gives the leaf its digest), and a winner is reported without the decisions
that change nothing in its schedule (`Space.simplest`).
"""

from __future__ import annotations

import collections
import math
import weakref
from dataclasses import dataclass, field

from irforge.attributes import DictAttr
from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.diagnostics import IRForgeError, error
from irforge.hashing import structural_hash
from irforge.ir import Operation, OpResult
from irforge.pass_manager import PassManager, ScheduledPass
from irforge.pipeline import schedule_text

TUNING_LEVEL = "loop"  # where kernels are formed and nothing is scheduled yet
MEMO = 2048  # pass runs a space remembers


# ---- the lowering and its decisions ----------------------------------------------------------------------------
def tuning_point(schedule: list[ScheduledPass]) -> int | None:
    """Where in a lowering kernels are formed and nothing is scheduled yet: the index of the first pass that takes
    the IR past the tuning level (the schedule's length if it ends there; None if it never gets there)."""
    from irforge.dialect import LEVELS

    level = None
    for i, sp in enumerate(schedule):
        out = sp.pass_.leaves_level()
        if out != "any" and LEVELS.index(out) > LEVELS.index(TUNING_LEVEL):
            return i if level == TUNING_LEVEL else None
        level = out if out != "any" else level
    return len(schedule) if level == TUNING_LEVEL else None


def split_lowering(after=None, before=None) -> tuple[list[ScheduledPass], list[ScheduledPass]]:
    """(to the tuning level, from it to cuda): the default lowering with the `after`/`before` insertions, cut
    where kernels are formed."""
    from irforge.compiler import lowering

    full = lowering("cuda", after=after, before=before)
    n = tuning_point(full)
    if n is None:
        raise error(f"the lowering does not pass through the {TUNING_LEVEL} level")
    return full[:n], full[n:]


@dataclass(frozen=True)
class Decision:
    """One option of one pass: a level of the search tree."""

    pass_name: str
    option: str
    values: tuple  # the domain's values
    baseline: object  # the pipeline's value (0 by default: the heuristic's choice)
    at: int  # where in the schedule the pass first runs
    last: bool  # the last decision of its pass (the pass can run once it is made)

    @property
    def name(self) -> str:
        return f"{self.pass_name}.{self.option}"


def _on_kernels(sp: ScheduledPass) -> bool:
    """Whether the pass runs on kernels (a `tune` attribute reaches it)."""
    from irforge.registry import registry

    if not sp.path:
        return False
    anchor = sp.path[-1]
    cls = registry().op_class(anchor)
    return anchor == "kernel" or (cls is not None and "kernel" in cls.anchor_aliases)


def decisions_of(schedule: list[ScheduledPass]) -> list[Decision]:
    """Every tunable option of every pass the schedule runs on kernels, in pipeline order (a pass that runs
    several times is decided where it first runs: a `tune` attribute gives every run the same value)."""
    out: list[Decision] = []
    seen = set()
    for i, sp in enumerate(schedule):
        p = sp.pass_
        if p.name in seen or not _on_kernels(sp):
            continue
        seen.add(p.name)
        mine = [(k, o) for k, o in p.options.items() if o.domain is not None]
        for j, (k, o) in enumerate(mine):
            out.append(Decision(p.name, k, tuple(o.domain.values()), p.option_values()[k], i, j == len(mine) - 1))
    return out


def space_version(schedule: list[ScheduledPass]) -> str:
    """What a tuned point means: the schedule (every pass and option value) and the decisions' domains. Winners
    stay valid while it is unchanged, whatever the passes' implementations do."""
    import hashlib

    domains = [(d.name, [repr(v) for v in d.values]) for d in decisions_of(schedule)]
    return hashlib.sha256(repr((schedule_text(schedule), domains)).encode()).hexdigest()[:16]


def tune_attr(point: dict[str, dict[str, object]]) -> DictAttr:
    """A point as a kernel's `tune` attribute."""
    return DictAttr({p: DictAttr(opts) for p, opts in point.items()})


def kernels_of(module: Operation) -> list[Operation]:
    """The ops a `tune` attribute goes on: kernels, at any level."""
    return [op for op in module.walk() if "kernel" in op.anchor_aliases]


def set_tune(module: Operation, point: dict) -> None:
    for k in kernels_of(module):
        if point:
            k.attributes["tune"] = tune_attr(point)
        else:
            k.attributes.pop("tune", None)


# ---- isolated kernels ------------------------------------------------------------------------------------------
def isolate(kernel: Operation) -> ModuleOp:
    """A module holding `kernel` alone: a function of the buffers it reads (in order of first use) returning the
    buffers it writes. A buffer its function returns as a state (a KV cache, updated in place) stays one: the
    isolated function takes it and returns it as that state, so that what the kernel leaves unwritten is the
    state's, as in the program. Raises an IRForgeError when the kernel uses a value that is not a buffer (it
    cannot run alone)."""
    outside: list = []
    for op in kernel.walk():
        for v in op.operands:
            if v not in outside and not _defined_within(v, kernel):
                outside.append(v)
    written = [v for v in outside if isinstance(v, OpResult) and _is_written_by(v, kernel)]
    states = _states_written(kernel, written)
    entries = [arg for _, arg in states.values()]
    read = [v for v in outside if v not in written and v not in entries]
    results = [v for v in written if v not in states] + list(states)
    if any(not hasattr(v.type, "shape") for v in outside):
        raise error("the kernel uses a value that is not a buffer: it cannot be tuned alone", kernel.loc)
    args = read + entries
    attrs = {"state": tuple(name for name, _ in states.values())} if states else None
    func = FuncOp.build("forward", [v.type for v in args], [v.type for v in results], [v.name_hint for v in args],
                        attributes=attrs)  # fmt: skip
    vm = dict(zip(args, func.body.args))
    for v in written:
        func.body.append(v.op.clone(vm))
    func.body.append(kernel.clone(vm))
    func.body.append(ReturnOp([vm[v] for v in results]))
    module = ModuleOp()
    module.body.append(func)
    return module


def _states_written(kernel: Operation, written: list) -> dict:
    """{buffer: (state name, the state's argument)} for each written buffer its function returns as a state."""
    func = kernel.parent_op
    while func is not None and not isinstance(func, FuncOp):
        func = func.parent_op
    if func is None or not func.state_names():
        return {}
    ret = func.body.ops[-1]
    return {ret.operands[pos]: (name, arg) for name, arg, pos in func.state_pairs() if ret.operands[pos] in written}


def _defined_within(v, op: Operation) -> bool:
    owner = v.op if isinstance(v, OpResult) else v.block.parent.parent if v.block.parent else None
    return owner is not None and op.is_ancestor_of(owner)


def _is_written_by(v, kernel: Operation) -> bool:
    return any(
        user.name.endswith(".store") and user.operands[0] is v for user in v.users if kernel.is_ancestor_of(user)
    )


def kernel_key(module: ModuleOp) -> str:
    """The structural hash of an isolated kernel, blind to its name and its `tune` attribute."""
    saved = []
    for k in kernels_of(module):
        saved.append((k, dict(k.attributes)))
        k.attributes.pop("tune", None)
        k.attributes["sym_name"] = ""
    try:
        return structural_hash(module)
    finally:
        for k, attrs in saved:
            k.attributes = attrs


def digest(module: Operation) -> str:
    """The structural hash of a schedule, blind to the `tune` attribute that led to it."""
    saved = [(k, k.attributes.pop("tune")) for k in kernels_of(module) if "tune" in k.attributes]
    try:
        return structural_hash(module)
    finally:
        for k, t in saved:
            k.attributes["tune"] = t


# ---- the tree --------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class State:
    """Values for the first `len(values)` decisions and the IR they lead to: before the next pass with an undecided
    option (`pos` indexes the schedule), or, for a pass decided halfway, before it (`probe`: the IR with the pass's
    other options at the pipeline's values, for merging and the prior)."""

    values: tuple
    pos: int
    parent: State | None = None
    digest: str | None = None
    features: object = None  # cost.Features of the IR (or the probe) completed with the pipeline's values
    module: Operation | None = field(default=None, repr=False)  # kept while expanded


@dataclass
class Expansion:
    children: list[tuple[object, State]]  # (value, child), in the decision's order
    refused: list[tuple[object, str]]  # values a pass's check refused, with its reason
    merged: list[tuple[object, object]]  # (value, the value it leaves the same IR as)


class Space:
    """The decisions of one isolated kernel's schedule and the tree of their values."""

    def __init__(self, module: ModuleOp, schedule: list[ScheduledPass], features=None):
        self.module = module
        self.schedule = schedule
        self.decisions = decisions_of(schedule)
        # where the passes after the decisions start: what a compile job runs on the leaf's point
        self.end = max((d.at for d in self.decisions), default=-1) + 1
        self.features = features  # IR -> cost.Features (None: no prior)
        self.baseline = tuple(d.baseline for d in self.decisions)
        self._memo: collections.OrderedDict = collections.OrderedDict()  # (lineage, pass, options) -> IR or error
        self._lineage: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # IR made here -> its lineage

    @property
    def size(self) -> int:
        """Points before pruning: the product of the domains."""
        return math.prod(len(d.values) for d in self.decisions)

    def point(self, values: tuple) -> dict[str, dict[str, object]]:
        """The `tune` attribute's content for (a prefix of) the decisions' values: every value that differs from
        the pipeline's."""
        out: dict[str, dict[str, object]] = {}
        for d, v in zip(self.decisions, values):
            if v != d.baseline:
                out.setdefault(d.pass_name, {})[d.option] = v
        return out

    def values_of(self, point: dict) -> tuple:
        return tuple(point.get(d.pass_name, {}).get(d.option, d.baseline) for d in self.decisions)

    def is_leaf(self, state: State) -> bool:
        return len(state.values) == len(self.decisions)

    def root(self) -> State:
        first = self.decisions[0].at if self.decisions else self.end
        m = self._lowered(self.module, 0, first, {})
        return self._state((), first, None, m, at=first)

    def _state(self, values, pos, parent, module, at, keep=True) -> State:
        """A state whose IR `module` stands before schedule[at]."""
        s = State(values, pos, parent, digest(module))
        s.features = self.completed_features(module, at, values)
        if keep:
            s.module = module
        return s

    def completed_features(self, module: Operation, at: int, values: tuple):
        """The features of the schedule a state leads to with the decisions not made yet at the pipeline's
        values (`module` stands before schedule[at]): what the prior ranks. A partly scheduled IR says little
        about the kernel it becomes (before tile-tensorize runs, every point computes on the CUDA cores); its
        completion by the heuristics is a whole schedule. None without a cost model, or when the completion is
        refused."""
        if self.features is None:
            return None
        if at >= self.end:
            return self.features(module)
        try:
            m = self._lowered(module, at, self.end, self.point(values))
        except Exception:  # refused (or a pass's bug) with the heuristics' values: no prediction
            return None
        return self.features(m)

    def materialize(self, state: State) -> Operation:
        """The state's IR, recomputed from its parent's when it was let go."""
        if state.module is None:
            parent = self.materialize(state.parent)
            d = self.decisions[len(state.values) - 1]
            if d.last:
                state.module = self._lowered(parent, d.at, state.pos, self.point(state.values))
            else:
                state.module = parent
        return state.module

    def _lowered(self, module: Operation, start: int, end: int, point: dict) -> Operation:
        """`module` (left as it is) run through schedule[start:end] at `point`, a pass at a time, each run
        remembered by what went in (the IR's lineage: the IR it came from and the pass options that made it) and
        the pass's options: rollouts and completions run the same passes on the same IR over and over."""
        key = self._lineage.get(module) or ("ir", digest(module))
        for i in range(start, end):
            name = self.schedule[i].pass_.name
            key = (key, i, repr(sorted(point.get(name, {}).items())))
            done = self._memo.get(key)
            if done is None:
                m = module.clone()
                set_tune(m, point)
                try:
                    PassManager(self.schedule[i : i + 1]).run(m)
                    done = m
                except Exception as e:  # remembered too: the same refusal every time
                    done = e
                self._memo[key] = done
                if len(self._memo) > MEMO:
                    self._memo.popitem(last=False)
            else:
                self._memo.move_to_end(key)
            if isinstance(done, Exception):
                raise done
            module = done
        out = module.clone()
        set_tune(out, point)
        self._lineage[out] = key
        return out

    def expand(self, state: State) -> Expansion:
        """The children of `state`: pruned, merged, each with its features."""
        d = self.decisions[len(state.values)]
        module = self.materialize(state)
        nxt = len(state.values) + 1
        stop = self.decisions[nxt].at if nxt < len(self.decisions) else self.end
        end = stop if d.last else d.at + 1
        ordered = [v for v in d.values if v != d.baseline] + [d.baseline]
        tried: list[tuple[object, State]] = []
        refused: list[tuple[object, str]] = []
        for v in ordered:
            values = (*state.values, v)
            try:
                m = self._lowered(module, d.at, end, self.point(values))
            except IRForgeError as e:
                refused.append((v, _reason(e)))
                if not d.last and self._rescued(module, len(state.values), values):
                    tried.append((v, State(values, d.at, state, None, state.features)))
                continue
            except Exception as e:  # a pass's bug: that value cannot be scheduled; the search goes on without it
                refused.append((v, f"internal error: {type(e).__name__}: {e}"))
                continue
            child = self._state(values, end if d.last else d.at, state, m, at=end, keep=False)
            tried.append((v, child))
        children, merged = _merge(tried, d.baseline)
        order = {v: i for i, v in enumerate(d.values)}
        children.sort(key=lambda vc: order[vc[0]])
        rescued = {v for v, c in children if c.digest is None}
        return Expansion(children, [(v, why) for v, why in refused if v not in rescued], merged)

    def _rescued(self, module: Operation, index: int, values: tuple) -> bool:
        """Whether a value of one of a pass's options, refused with the pass's later options at the pipeline's
        values, runs with one of them changed (each value of each in turn): then it stays a child, its subtree
        decides. (A value that only two later options changed together would rescue is pruned.)"""
        d = self.decisions[index]
        later = []
        for e in self.decisions[index + 1 :]:
            if e.pass_name != d.pass_name:
                break
            later.append(e)
        for j, e in enumerate(later, start=index + 1):
            for v in e.values:
                if v == e.baseline:
                    continue
                trial = (*values, *(x.baseline for x in self.decisions[index + 1 : j]), v)
                try:
                    self._lowered(module, d.at, d.at + 1, self.point(trial))
                    return True
                except Exception:
                    continue
        return False

    def step(self, state: State, value) -> State | None:
        """One child of `state`, without its siblings (None when the pass refuses it): what a rollout takes. The
        child keeps its IR until `finish`."""
        d = self.decisions[len(state.values)]
        values = (*state.values, value)
        if not d.last:
            child = State(values, d.at, state)
            child.module = self.materialize(state)
            return child
        nxt = len(values)
        stop = self.decisions[nxt].at if nxt < len(self.decisions) else self.end
        try:
            m = self._lowered(self.materialize(state), d.at, stop, self.point(values))
        except Exception:  # refused (or a pass's bug): not a child
            return None
        child = State(values, stop, state)
        child.module = m
        return child

    def finish(self, leaf: State) -> State:
        """A leaf's digest and features, and its IR let go (with the rollout states above it)."""
        if leaf.digest is None or leaf.features is None:
            m = self.materialize(leaf)
            leaf.digest = digest(m)
            leaf.features = self.features(m) if self.features is not None else None
        leaf.module, leaf.parent = None, None
        return leaf

    def simplest(self, values: tuple) -> tuple:
        """`values` with each decision that changes nothing in the schedule put back to the pipeline's value (a
        rollout draws every decision, those that do not matter here included)."""
        want = digest(self.schedule_of(values))
        for i, d in enumerate(self.decisions):
            if values[i] == d.baseline:
                continue
            trial = (*values[:i], d.baseline, *values[i + 1 :])
            try:
                if digest(self.schedule_of(trial)) == want:
                    values = trial
            except Exception:  # refused (or a pass's bug): the value stays
                continue
        return values

    def schedule_of(self, values: tuple) -> Operation:
        """The IR a whole point leads to, as a leaf's state stands for it (its `digest` is the leaf's)."""
        return self._lowered(self.module, 0, self.end, self.point(values))


def _merge(tried: list[tuple[object, State]], baseline) -> tuple[list, list]:
    """One child per distinct IR: the first value leading to it (explicit values come before the baseline), or the
    baseline when every value leads to the same IR."""
    digests = {c.digest for _, c in tried if c.digest is not None}
    unknown = [vc for vc in tried if vc[1].digest is None]
    if len(digests) == 1 and not unknown and len(tried) > 1:
        keep = next(((v, c) for v, c in tried if v == baseline), tried[0])
        return [keep], [(v, keep[0]) for v, _ in tried if v is not keep[0]]
    kept: dict[str, tuple[object, State]] = {}
    merged = []
    for v, c in tried:
        if c.digest is None:
            continue
        if c.digest in kept:
            merged.append((v, kept[c.digest][0]))
        else:
            kept[c.digest] = (v, c)
    return [*kept.values(), *unknown], merged


def _reason(e: IRForgeError) -> str:
    return e.message
