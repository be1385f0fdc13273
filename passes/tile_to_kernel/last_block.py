"""lower-to-kernel's rule for a combine over a block axis folded by the last block of each tile.

`partials.py` splits a kernel at such a combine into a first kernel, which stores each block's partial carrier in a
workspace, and a second, which folds them and runs what follows. A second kernel costs a launch and a pass over the
workspace after the whole first kernel has drained: on the decode-shaped products and attention of an LLM, a few
microseconds beside tens. Where the second kernel needs the blocks of one tile only once (nothing after the combine
is distributed over its axis), the two are joined again after materialization:

    <the first kernel's body: each block stores its partial carrier>
    %last = kernel.arrive %counter[<the block's tile>] of <blocks along the axis>
    kernel.if %last { <the second kernel's body, in the block that arrived last> }

The counter is a `zeroed` i32 allocation, one element per tile (the block's index along the other block axes), that
the last block leaves zero again. The fold reads the partials in block order, so the result does not depend on
which block came last. This is CUTLASS's serial split-K and stream-K fix-up, for any monoid: the online softmax
carrier of split-KV decode attention folds the same way.
"""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.builder import KernelBuilder, Val
from irforge.dialects.kernel.types import PtrType

from irforge import index_expr as ix
from irforge.attributes import UNIT, SymbolRef
from irforge.ir import Operation
from irforge.target import target
from irforge.types import TensorType, i32

from . import memory, partials


def why_not(kernel: T.KernelOp, comb: T.CombineOp) -> str | None:
    """Why the last block of a tile cannot fold a combine over a block axis in `kernel` itself (None: it can)."""
    why = partials.why_not(comb)
    if why:
        return why
    axis = comb.over[0]
    ops = list(kernel.walk())
    later = ops[ops.index(comb) + 1 :]
    if any(isinstance(op, T.LoopOp) and axis in op.bind for op in later if not op.is_ancestor_of(comb)):
        return f"what follows the combine is distributed over {axis}: every block of the tile takes part in it"
    if any(isinstance(op, T.CombineOp) and partials.via_partials(op) for op in later):
        return f"a second combine over a block axis follows it"
    if memory.producer_stages(kernel):
        return "a producer warp copies its stages: the arrival's barriers would need it too"
    return None


def fuse(module: Operation, func: Operation, first: str, second: str, axis: str) -> None:
    """Join the materialized kernels `first` and `second` (of `partials.split_kernels`) into one, launched once."""
    k1, k2 = (_symbol(module, name) for name in (first, second))
    l1, l2 = (next(op for op in func.body.ops if _launches(op, k)) for k in (k1, k2))
    host = list(dict.fromkeys([*l1.args, *l2.args]))
    counter = K.AllocOp((), [TensorType(i32, (_tiles(k1, axis),))], {"zeroed": UNIT}, loc=l1.loc,
                        result_hints=[f"{_base(first)}_arrivals"])  # fmt: skip
    func.body.insert_before(l1, counter)
    types = [_param_type(k1, k2, l1, l2, v) for v in host] + [PtrType(i32)]
    names = [_arg_hint(k1, k2, l1, l2, v) for v in host] + ["arrivals"]
    kb = KernelBuilder.kernel(_base(first), types, k1.attributes["grid"], k1.attributes["block"], names, k1.loc)
    bits = max(k.attributes.get("index_bits", 32) for k in (k1, k2))
    if bits > 32:
        kb.op.attributes["index_bits"] = bits
    args = dict(zip(host, kb.args))
    _move_body(k1, l1, args, kb.op.body, kb.op.body)
    grid = dict(zip(("x", "y", "z"), k1.attributes["grid"]))
    tile, stride = ix.Const(0), 1
    for a, n in grid.items():
        if f"blockIdx.{a}" != axis and n > 1:
            tile = tile + Val(kb.block_id(a, f"b{a}")) * stride
            stride *= n
    last = kb.arrive(kb.args[-1], tile, grid[axis.split(".")[1]])
    with kb.if_(last) as br, br.then():
        _move_body(k2, l2, args, kb.block, kb.op.body)
    _fit_static_smem(kb.op)
    module.body.insert_before(k1, kb.op)
    func.body.insert_before(l1, K.LaunchOp([*host, counter.result], (), {"callee": SymbolRef(kb.op.sym_name)}, loc=l1.loc))
    for op in (l1, l2, k1, k2):
        op.erase()


def _symbol(module: Operation, name: str) -> K.KernelFuncOp:
    return next(op for op in module.body.ops if isinstance(op, K.KernelFuncOp) and op.sym_name == name)


def _launches(op: Operation, k: K.KernelFuncOp) -> bool:
    return isinstance(op, K.LaunchOp) and op.attributes["callee"].name == k.sym_name


def _base(first: str) -> str:
    return first.removesuffix("_partial")


def _tiles(k: K.KernelFuncOp, axis: str) -> int:
    gx, gy, gz = k.attributes["grid"]
    return {"blockIdx.x": gy * gz, "blockIdx.y": gx * gz, "blockIdx.z": gx * gy}[axis]


def _param(k: K.KernelFuncOp, launch: K.LaunchOp, v):
    return next((a for a, h in zip(k.body.args, launch.args) if h is v), None)


def _param_type(k1, k2, l1, l2, v):
    a = _param(k1, l1, v) or _param(k2, l2, v)
    return a.type


def _arg_hint(k1, k2, l1, l2, v):
    a = _param(k1, l1, v) or _param(k2, l2, v)
    return a.name_hint


def _move_body(k: K.KernelFuncOp, launch: K.LaunchOp, args: dict, block, top) -> None:
    """Move the ops of `k`'s body to the end of `block` (its shared buffers to the top of the kernel `top`), its
    parameters replaced by the joined kernel's."""
    for a, h in zip(k.body.args, launch.args):
        a.replace_all_uses_with(args[h])
    smem = sum(isinstance(op, K.SmemOp) for op in top.ops)
    for op in list(k.body.ops):
        op.detach()
        if isinstance(op, K.SmemOp):
            top.insert(smem, op)
            smem += 1
        else:
            block.append(op)


def _fit_static_smem(k: K.KernelFuncOp) -> None:
    """Static shared buffers past the static limit (the two kernels' together) go to dynamic shared memory."""
    used, limit = 0, target().smem_static
    for op in k.body.ops:
        if isinstance(op, K.SmemOp) and "dynamic" not in op.attributes:
            used += op.result.type.nbytes
            if used > limit:
                op.attributes["dynamic"] = UNIT
