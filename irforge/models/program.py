"""A captured model step as segments: the decoder layers compiled once, the rest around them.

A whole-model capture is one torch-level function of thousands of ops, most of them the same decoder layer N
times over. `split_layers` cuts it at the decoder layers (the module each op came from, as torch.export records
it) into a sequence of *instances*, each a call of a *segment*: a function of the values it reads (its arguments)
and the values later code reads (its results), its params and state named relative to the layer
(`self_attn.q_proj.weight` for `model.layers.3.self_attn.q_proj.weight`). Instances whose functions are
structurally equal (`irforge.hashing`) share one segment, which is lowered once: one set of kernels, bound per
instance to that layer's params and state.

    step = split_layers(captured, "model.layers.")     # ModelStep: segments + instances
    lower(step, "loop")                                # each distinct segment through the pipelines, once
    outputs = run(step, {"input_ids": ids, ...}, params, state)   # the reference interpreters, segment by segment
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field

import numpy as np

from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.diagnostics import error
from irforge.hashing import structural_hash
from irforge.ir import Operation, OpResult, Value


@dataclass
class Segment:
    """A function several instances share, at the level it was lowered to."""

    name: str
    module: Operation

    @property
    def func(self) -> FuncOp:
        return next(op for op in self.module.body.ops if isinstance(op, FuncOp))


@dataclass
class Instance:
    """One call of a segment: where its arguments come from and where its results go (keys of the step's values),
    and the model's name for each of the segment's params and states."""

    segment: str
    scope: str  # the module path it stands for ("model.layers.3"), "" outside the layers
    inputs: list[str]
    outputs: list[str]
    symbols: dict[str, str]  # segment's param / state name -> the model's


@dataclass
class ModelStep:
    """One program of a model (a prefill or a decode step) as instances of segments."""

    name: str
    segments: dict[str, Segment]
    instances: list[Instance]
    inputs: list[tuple[str, object]]  # (name, type) of the step's arguments, state excluded
    outputs: list[str]  # keys of the values the step returns, state excluded
    output_types: list = field(default_factory=list)
    state: dict[str, object] = field(default_factory=dict)  # model state name -> type
    level: str = "torch"

    def users(self, segment: str) -> list[str]:
        return [i.scope for i in self.instances if i.segment == segment]


# ---- splitting -------------------------------------------------------------------------------------------------
def _layer_of(scope: str, layers: str) -> str | None:
    """The decoder layer ("model.layers.3") a module path lies in, or None."""
    m = re.match(re.escape(layers) + r"(\d+)(\.|$)", scope)
    return layers + m.group(1) if m else None


# torch ops cheap enough to compute again in each layer rather than pass their result: index arithmetic, views
_REMAT = {"arange", "add", "sub", "mul", "unsqueeze", "expand", "view", "reshape", "le", "lt", "ge", "gt", "eq", "ne",
          "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or", "bitwise_not"}  # fmt: skip


def rematerialize_in_layers(func: FuncOp, scopes: dict, layers: str) -> None:
    """Compute again inside each decoder layer what the layers read from outside them that index arithmetic makes
    from values they read anyway (the attention mask, `key <= query + cache_position`, from the cache position
    the layers take for their cache updates): the layer's attention then computes its mask from indices, as the
    tensor-core fold requires, instead of reading a mask tensor built before the layers."""
    body = list(func.body.ops)
    layer_of = {id(op): _layer_of(scopes.get(op, ""), layers) for op in body}
    read = {id(v) for op in body if layer_of[id(op)] for v in op.operands}
    for layer in dict.fromkeys(x for x in layer_of.values() if x):
        run = [op for op in body if layer_of[id(op)] == layer]
        clones: dict = {}
        for op in run:
            for i, v in enumerate(op.operands):
                owner = _owner(v)
                if owner is None or layer_of.get(id(owner)) or (ops := _closure(v, read)) is None:
                    continue
                for o in ops:
                    if o.results[0] not in clones:
                        new = o.clone(clones)
                        func.body.insert_before(run[0], new)
                        scopes[new] = scopes.get(run[0], layer)
                op.set_operand(i, clones[v])


def _owner(v: Value) -> Operation | None:
    """The op defining `v`; None for a function argument."""
    return v.op if isinstance(v, OpResult) else None


def _closure(v: Value, read: set) -> list[Operation] | None:
    """The ops computing `v` from values the layers read anyway (`read`) or from nothing, in program order, when
    all are index arithmetic or views (`_REMAT`); None otherwise."""
    ops, todo, seen = [], [v], set()
    while todo:
        x = todo.pop()
        op = _owner(x)
        if op is None or id(op) in seen or (x is not v and id(x) in read):
            continue
        parts = op.name.split(".")
        if parts[:2] != ["torch", "aten"] or len(parts) < 3 or parts[2] not in _REMAT:
            return None
        seen.add(id(op))
        ops.append(op)
        todo.extend(op.operands)
    order = {id(o): i for i, o in enumerate(v.owner.parent.ops)}
    return sorted(ops, key=lambda o: order[id(o)])


def split_layers(func: FuncOp, scopes: dict, layers: str, name: str) -> ModelStep:
    """Cut `func` into runs of ops from one decoder layer (module path `<layers><i>`) or from outside them; runs
    with structurally equal functions share a segment. What the layers read that index arithmetic makes from
    values they read anyway is computed again in each (`rematerialize_in_layers`)."""
    rematerialize_in_layers(func, scopes, layers)
    ops = [op for op in func.body.ops if not isinstance(op, ReturnOp) and op.name != "torch.param"]
    ret = func.body.ops[-1]
    runs: list[tuple[str | None, list[Operation]]] = []
    for op in ops:
        layer = _layer_of(scopes.get(op, ""), layers)
        if runs and runs[-1][0] == layer:
            runs[-1][1].append(op)
        else:
            runs.append((layer, [op]))
    keys: dict[Value, str] = {a: a.name_hint for a in func.body.args}
    n_state = len(func.state_names())
    step = ModelStep(
        name,
        {},
        [],
        inputs=[(a.name_hint, a.type) for a in func.body.args[: len(func.body.args) - n_state]],
        outputs=[],
        state={n: a.type for n, a, _ in func.state_pairs()},
    )
    by_hash: dict[str, str] = {}
    first_layer = next((i for i, (layer, _) in enumerate(runs) if layer is not None), len(runs))
    for r, (layer, run_ops) in enumerate(runs):
        seg_func, inst = _outline(func, ret, run_ops, keys, layer)
        h = structural_hash(seg_func)
        seg = by_hash.get(h)
        if seg is None:
            base = "layer" if layer is not None else "prologue" if r < first_layer else "epilogue"
            seg = base if base not in step.segments else f"{base}_{len(step.segments)}"
            seg_func.attributes["sym_name"] = seg
            module = ModuleOp()
            module.body.append(seg_func)
            step.segments[seg] = Segment(seg, module)
            by_hash[h] = seg
        inst.segment = seg
        step.instances.append(inst)
    n_out = len(ret.operands) - n_state
    step.outputs = [keys[v] for v in ret.operands[:n_out]]
    step.output_types = [v.type for v in ret.operands[:n_out]]
    return step


def _outline(func: FuncOp, ret: ReturnOp, run_ops: list[Operation], keys: dict, layer: str | None):
    """The function computing `run_ops` (params cloned in, named relative to `layer`) and its instance."""
    inside = {id(op) for op in run_ops}
    defined = [r for op in run_ops for r in op.results]
    for v in defined:
        keys.setdefault(v, f"%{len(keys)}")
    prefix = layer + "." if layer else ""
    state_of = {arg: (n, ret.operands[pos]) for n, arg, pos in func.state_pairs()}
    inputs, params, states = [], [], []
    for op in run_ops:
        for v in op.operands:
            owner = getattr(v, "op", None)
            if owner is not None and owner.name == "torch.param":
                if owner not in params:
                    params.append(owner)
            elif v in state_of:
                if v not in states:
                    states.append(v)
            elif (owner is None or id(owner) not in inside) and v not in inputs:
                inputs.append(v)
    for arg, (_, new) in state_of.items():  # a state the run overwrites without reading it is its state too
        if arg not in states and any(new is r for r in defined):
            states.append(arg)
    later = {id(v) for op in func.body.ops if id(op) not in inside for v in op.operands}
    outputs = [v for v in defined if id(v) in later]
    for arg in states:
        n, new = state_of[arg]
        if not any(new is r for r in defined):
            raise error(f"state '{n}' is read by {layer or 'the top level'} but updated elsewhere")
    new_state = {id(state_of[a][1]) for a in states}  # returned as state; an output only if later code reads it
    outputs = [v for v in outputs if id(v) not in new_state or _read_outside(v, inside, ret)]
    symbols: dict[str, str] = {}

    def relative(name: str) -> str:
        short = name[len(prefix) :] if prefix and name.startswith(prefix) else name
        symbols[short] = name
        return short

    state_names = [relative(state_of[a][0]) for a in states]
    arg_types = [v.type for v in inputs] + [a.type for a in states]
    out_values = outputs + [state_of[a][1] for a in states]
    seg = FuncOp.build(
        "segment",
        arg_types,
        [v.type for v in out_values],
        arg_hints=[v.name_hint for v in inputs] + state_names,
        attributes={"state": tuple(state_names)} if states else None,
    )
    vm: dict = dict(zip([*inputs, *states], seg.body.args))
    for p in params:
        clone = p.clone(vm)
        clone.attributes["sym"] = type(p.attributes["sym"])(relative(p.attributes["sym"].name))
        clone.results[0].name_hint = clone.attributes["sym"].name
        seg.body.append(clone)
    for op in run_ops:
        seg.body.append(op.clone(vm))
    seg.body.append(ReturnOp([vm[v] for v in out_values]))
    inst = Instance("", layer or "", [keys[v] for v in inputs], [keys[v] for v in outputs], symbols)
    return seg, inst


def _read_outside(v: Value, inside: set, ret: ReturnOp) -> bool:
    return any(u is not ret and id(u) not in inside for u in v.users)


def repeat_layers(step: ModelStep, layers: str, n: int, types: dict) -> bool:
    """Extend a step captured with two decoder layers to `n` by induction: when layer 1 runs layer 0's segment on
    layer 0's results and on the values layer 0 reads too (the mask, the rotary tables), layer k runs it on layer
    k-1's results alike. Adds the new layers' instances, state and param types (`types`, by the model's names,
    updated); the instances after the layers read the last layer's results. False (the step unchanged) when layer
    1 is no such step of layer 0."""
    at = [i for i, inst in enumerate(step.instances) if inst.scope.startswith(layers)]
    if len(at) != 2 or at[1] != at[0] + 1:
        return False
    first, second = step.instances[at[0]], step.instances[at[1]]
    carried = {p: first.outputs.index(k) for p, k in enumerate(second.inputs) if k in first.outputs}
    invariant = all(p in carried or k == first.inputs[p] for p, k in enumerate(second.inputs))
    read_later = {k for inst in step.instances[at[1] + 1 :] for k in inst.inputs} | set(step.outputs)
    if first.segment != second.segment or not invariant or read_later & set(first.outputs):
        return False
    old_prefix = second.scope + "."
    prev, added = second, []
    for k in range(2, n):
        scope = f"{layers}{k}"
        rename = lambda full: scope + "." + full[len(old_prefix) :] if full.startswith(old_prefix) else full
        inst = Instance(
            second.segment,
            scope,
            [prev.outputs[carried[p]] if p in carried else key for p, key in enumerate(second.inputs)],
            [f"{key}@{scope}" for key in second.outputs],
            {short: rename(full) for short, full in second.symbols.items()},
        )
        for full in second.symbols.values():
            if full in step.state:
                step.state[rename(full)] = step.state[full]
            if full in types:
                types[rename(full)] = types[full]
        added.append(inst)
        prev = inst
    last = dict(zip(second.outputs, prev.outputs))
    for inst in step.instances[at[1] + 1 :]:
        inst.inputs = [last.get(k, k) for k in inst.inputs]
    step.outputs = [last.get(k, k) for k in step.outputs]
    step.instances[at[1] + 1 : at[1] + 1] = added
    return True


# ---- lowering --------------------------------------------------------------------------------------------------
def lower(step: ModelStep, level: str, instrumentations=(), tuning: str | None = None) -> None:
    """Lower every distinct segment to `level` with the default lowering, its kernels named after the segment
    (`layer_k_linear`) once they exist, so that the segments' kernels never clash in one program; `tuning` (a
    tuning database's path, "" for the default one) replays tuned schedules."""
    from irforge.compiler import lowering
    from irforge.dialect import LEVELS
    from irforge.instrumentation import VerifyEach
    from irforge.pass_manager import PassManager
    from irforge.pipeline import schedule_text

    at = LEVELS.index(step.level)
    stops = [lvl for lvl in ("loop", level) if at < LEVELS.index(lvl) <= LEVELS.index(level)]
    for seg in step.segments.values():
        done = len(lowering(step.level, tuning=tuning))
        for stop in dict.fromkeys(stops):
            schedule = lowering(stop, tuning=tuning)[done:]
            PassManager(schedule, [VerifyEach(), *instrumentations], schedule_text(schedule)).run(seg.module)
            done += len(schedule)
            if stop == "loop":
                prefix_kernels(seg)
    step.level = level


def prefix_kernels(seg: Segment) -> None:
    """Name the segment's kernels after it (`layer_k_linear`): kernels of several segments share one program."""
    from irforge.dialects.loop import KernelOp

    for op in seg.module.walk():
        if isinstance(op, KernelOp):
            op.attributes["sym_name"] = f"{seg.name}_{op.sym_name}"


def code_version() -> str:
    """A digest of irforge's own sources (passes, dialects, pipelines): a compile cache key must change with them."""
    import irforge

    root = os.path.dirname(os.path.dirname(os.path.abspath(irforge.__file__)))
    h = hashlib.sha256()
    for top in ("irforge", "dialects", "passes", "pipelines"):
        for dirpath, dirnames, files in sorted(os.walk(os.path.join(root, top))):
            dirnames.sort()
            for f in sorted(files):
                if f.endswith((".py", ".lark", ".pipeline", ".cuh")):
                    with open(os.path.join(dirpath, f), "rb") as fh:
                        h.update(f.encode() + fh.read())
    return h.hexdigest()


# ---- running on the reference interpreters ---------------------------------------------------------------------
def run(step: ModelStep, inputs: dict, params: dict, state: dict) -> list[np.ndarray]:
    """The step on its level's reference interpreter, instance by instance: `params` and `state` by the model's
    names; `state` is updated (its entries replaced by the new values)."""
    from irforge.interpreter import interpret

    env = dict(inputs)
    for inst in step.instances:
        seg = step.segments[inst.segment]
        names = seg.func.state_names()
        args = [env[k] for k in inst.inputs] + [state[inst.symbols[n]] for n in names]
        seg_params = {short: params[full] for short, full in inst.symbols.items() if full in params}
        outs = interpret(seg.module, args, seg_params, entry=seg.name)
        for k, v in zip(inst.outputs, outs):
            env[k] = v
        for n, v in zip(names, outs[len(inst.outputs) :]):
            state[inst.symbols[n]] = v
    return [env[k] for k in step.outputs]
