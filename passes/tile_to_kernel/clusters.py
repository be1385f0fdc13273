"""lower-to-kernel's rule for a combine over a block axis whose blocks fit a thread block cluster (sm_90).

`partials.py` splits a kernel at such a combine: the first kernel stores each block's partial carrier in a workspace,
the second folds them and runs what follows. Across kernels the workspace goes through global memory, and the second
waits for the whole first to drain. When the combine's blocks along its axis are few enough to be one cluster, the
two materialized kernels are joined into one, launched in clusters of those blocks:

    <the first kernel's body: each block stores its partial carrier in its own shared memory>
    kernel.cluster_sync
    <the second kernel's body: the fold reads the partials of the cluster's blocks (`kernel.peer`), dealt over them>
    kernel.cluster_sync          // no block leaves while another still reads its shared memory

The fold reads the partials in block order, as the second kernel did: the result is the same. Any monoid folds this
way, the online softmax carrier of split-KV decode attention as split-K's sums, and what follows the combine may
still be shared by the blocks along the axis (a split softmax row's write-back). The cluster barrier costs what a
barrier costs, and the fold is spread over all the blocks, where the last block of each tile folding alone was slower
than a second kernel (bench/results/last_block-h100-2026-11-27).
"""

from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.builder import KernelBuilder
from irforge.dialects.kernel.cluster import PORTABLE_CLUSTER, ClusterSyncOp, PeerOp
from irforge.dialects.kernel.types import SmemType

from irforge import index_expr as ix
from irforge.attributes import UNIT, SymbolRef
from irforge.index_expr import AffineMap
from irforge.ir import Operation
from irforge.target import target

from . import memory, partials

# Shared memory a block may give its partial carriers (beside its stages): a split-K tile of 128 x 128 f32 sums.
CLUSTER_WORKSPACE_BYTES = 64 * 1024


def why_not(kernel: T.KernelOp, comb: T.CombineOp) -> str | None:
    """Why the blocks of a combine over a block axis cannot fold it in a cluster (None: they can)."""
    why = partials.why_not(comb)
    if why:
        return why
    if target().sm < 90:
        return f"{target().arch} has no thread block clusters"
    axis = comb.over[0]
    blocks = max(kernel.axis_size(axis), partials.shares(kernel, comb))
    if blocks > PORTABLE_CLUSTER:
        return f"its {blocks} blocks along {axis} are more than a cluster of {PORTABLE_CLUSTER} holds"
    if memory.producer_stages(kernel):
        return "a producer warp copies its stages, and the fold after the cluster barrier is the block's threads'"
    tiles = [lp for lp in T.enclosing_loops(comb) if set(lp.bind) & set(T.BLOCK_AXES)]
    if any(lp.work_items > lp.units(kernel) for lp in tiles):
        return "a block walks several tiles, whose partials its shared memory would hold at once"
    ops = list(kernel.walk())
    if any(isinstance(op, T.CombineOp) and partials.via_partials(op) for op in ops[ops.index(comb) + 1 :]):
        return "a second combine over a block axis follows it"
    points = math.prod(e for lp in T.enclosing_loops(comb) if isinstance(lp, T.ForOp) and lp not in tiles
                       for e in lp.extents)  # fmt: skip
    nbytes = points * sum(v.type.bytes for v in comb.operands)
    if nbytes > CLUSTER_WORKSPACE_BYTES:
        return f"its partials take {nbytes} bytes of a block's shared memory, over {CLUSTER_WORKSPACE_BYTES}"
    return None


def join(module: Operation, func: Operation, first: str, second: str, axis: str) -> None:
    """Join the materialized kernels `first` and `second` (of `partials.split_kernels`) into one kernel launched
    in clusters of the blocks along `axis`, their workspace in the blocks' shared memory."""
    k1, k2 = (_symbol(module, name) for name in (first, second))
    l1, l2 = (next(op for op in func.body.ops if _launches(op, k)) for k in (k1, k2))
    assert k1.attributes["grid"] == k2.attributes["grid"] and k1.attributes["block"] == k2.attributes["block"]
    workspaces = [v for v in l1.args if v in l2.args and isinstance(v.owner, K.AllocOp)]
    host = [v for v in dict.fromkeys([*l1.args, *l2.args]) if v not in workspaces]
    params = [_param(k1, l1, v) or _param(k2, l2, v) for v in host]
    grid = k1.attributes["grid"]
    cluster = tuple(g if f"blockIdx.{a}" == axis else 1 for a, g in zip("xyz", grid))
    kb = KernelBuilder.kernel(first.removesuffix("_partial"), [p.type for p in params], grid, k1.attributes["block"],
                              [p.name_hint for p in params], k1.loc)  # fmt: skip
    kb.op.attributes["cluster"] = cluster
    bits = max(k.attributes.get("index_bits", 32) for k in (k1, k2))
    if bits > 32:
        kb.op.attributes["index_bits"] = bits
    args = dict(zip(host, kb.args))
    body = kb.op.body
    smem = {}
    for w in workspaces:
        t = w.type
        op = K.SmemOp((), [SmemType(t.dtype, (t.numel // t.shape[0],))], {}, loc=k1.loc, result_hints=[w.name_hint])
        body.append(op)
        smem[w] = op.result
    _move_body(k1, l1, args, smem, body, body)
    kb.block.append(ClusterSyncOp((), (), {}, loc=k1.loc))
    _move_body(k2, l2, args, smem, body, body)
    kb.block.append(ClusterSyncOp((), (), {}, loc=k1.loc))
    _fit_static_smem(kb.op)
    module.body.insert_before(k1, kb.op)
    func.body.insert_before(l1, K.LaunchOp(host, (), {"callee": SymbolRef(kb.op.sym_name)}, loc=l1.loc))
    for op in (l1, l2, k1, k2, *(w.owner for w in workspaces)):
        op.erase()


def _symbol(module: Operation, name: str) -> K.KernelFuncOp:
    return next(op for op in module.body.ops if isinstance(op, K.KernelFuncOp) and op.sym_name == name)


def _launches(op: Operation, k: K.KernelFuncOp) -> bool:
    return isinstance(op, K.LaunchOp) and op.attributes["callee"].name == k.sym_name


def _param(k: K.KernelFuncOp, launch: K.LaunchOp, v):
    return next((a for a, h in zip(k.body.args, launch.args) if h is v), None)


def _move_body(k: K.KernelFuncOp, launch: K.LaunchOp, args: dict, smem: dict, block, top) -> None:
    """Move the ops of `k`'s body to the end of `block` (its shared buffers to the top of the kernel `top`), its
    parameters replaced by the joined kernel's and its workspace accesses by shared-memory ones."""
    for a, h in zip(k.body.args, launch.args):
        if h in smem:
            _to_shared(a, smem[h])
        else:
            a.replace_all_uses_with(args[h])
    at = sum(isinstance(op, K.SmemOp) for op in top.ops)
    for op in list(k.body.ops):
        op.detach()
        if isinstance(op, K.SmemOp):
            top.insert(at, op)
            at += 1
        else:
            block.append(op)


def _to_shared(ptr, buf) -> None:
    """A workspace `[blocks, points...]`: a block's stores of its partials go to its own shared buffer `[points]`,
    the fold's loads of block b's to block b's (the cluster's rank b along the axis)."""
    size = buf.type.numel
    for user, _ in list(ptr.uses):
        (e,) = user.exprs("index")
        rank, offset = ix.split_rows(e, size)
        n = user.attributes["index"].num_dims
        if isinstance(user, K.StoreOp):
            user.set_operand(1, buf)
        else:
            assert isinstance(user, K.LoadOp), user
            peer = PeerOp([buf, *user.index_operands], [buf.type], {"rank": AffineMap(n, (rank,))}, loc=user.loc)
            user.parent.insert_before(user, peer)
            user.set_operand(0, peer.result)
        user.attributes["index"] = AffineMap(n, (offset,))


def _fit_static_smem(k: K.KernelFuncOp) -> None:
    """Static shared buffers past the static limit (the two kernels' and the workspaces together) go to dynamic
    shared memory."""
    used, limit = 0, target().smem_static
    for op in k.body.ops:
        if isinstance(op, K.SmemOp) and "dynamic" not in op.attributes:
            used += op.result.type.nbytes
            if used > limit:
                op.attributes["dynamic"] = UNIT
