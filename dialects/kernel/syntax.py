"""Parse callbacks for the kernel dialect's custom syntax (`kernel.lark`): each returns the op's generic `OpAST`."""

from __future__ import annotations

from irforge.attributes import UNIT
from irforge.diagnostics import error
from irforge.index_expr import AffineMap
from irforge.parser import BlockAST, OpAST, RegionAST, bind_index_values
from irforge.types import FunctionType, TensorType, index

from ..launch import launch_dims
from . import ops as K
from .types import MbarrierType, SmemType


def _bind(groups, loc) -> tuple[list[AffineMap], list]:
    """One AffineMap per expression group, all over the SSA values the groups mention (in order of appearance)."""
    flat = [e for g in groups for e in g]
    exprs, refs = bind_index_values(flat, loc)
    maps, k = [], 0
    for g in groups:
        maps.append(AffineMap(len(refs), tuple(exprs[k : k + len(g)])))
        k += len(g)
    return maps, refs


def _attrs(d) -> dict:
    return dict(d) if d else {}


class KernelSyntax:
    def kernel_ints(self, c):
        return [int(t) for t in c]

    def kernel_iexprs(self, c):
        return list(c)

    def kernel_func_params(self, c):
        return list(c)

    def kernel_func_param(self, c):
        return (self.ref(c[0]), c[1])

    def kernel_carry(self, c):
        return (self.ref(c[0]), c[1], c[2])

    # ---- kernels and host ops -----------------------------------------------------------------------------------
    def kernel_func(self, c):
        sym, params, grid, block, cluster, attrs, region = c
        params = params or []
        attrs = {
            **_attrs(attrs),
            "sym_name": sym.name,
            "function_type": FunctionType(tuple(t for _, t in params), ()),
            "grid": launch_dims(grid),
            "block": launch_dims(block),
        }
        if cluster is not None:
            attrs["cluster"] = launch_dims(cluster)
        return OpAST("kernel.func", attrs=attrs, result_types=[], regions=[region.with_entry_args(params)])

    def kernel_alloc(self, c):
        attrs, t = c
        return OpAST("kernel.alloc", attrs=_attrs(attrs), result_types=[t])

    def kernel_param(self, c):
        sym, t = c
        return OpAST("kernel.param", attrs={"sym": sym}, result_types=[t])

    def kernel_view(self, c):
        v, t = c
        return OpAST("kernel.view", operands=[v], result_types=[t])

    def kernel_launch(self, c):
        sym, uses, attrs = c
        return OpAST("kernel.launch", operands=uses or [], attrs={**_attrs(attrs), "callee": sym}, result_types=[])

    # ---- geometry and index arithmetic --------------------------------------------------------------------------
    def kernel_axis(self, c):
        return OpAST(str(c[0]), attrs={"dim": str(c[1])}, result_types=[index])

    def kernel_linear(self, c):
        return OpAST(str(c[0]), result_types=[index])

    def kernel_index(self, c):
        (m,), refs = _bind([[c[0]]], None)
        return OpAST("kernel.index", operands=refs, attrs={"expr": m}, result_types=[index])

    # ---- values -------------------------------------------------------------------------------------------------
    def kernel_const(self, c):
        value, t = c
        return OpAST("kernel.const", attrs={"value": value}, result_types=[t])

    def kernel_scalar(self, c):
        name, uses, attrs, t = c
        return OpAST(str(name), operands=uses, attrs=_attrs(attrs), result_types=[t])

    def kernel_cast(self, c):
        v, src, dst = c
        return OpAST("kernel.cast", operands=[v], operand_types=[src], result_types=[dst])

    def kernel_splat(self, c):
        v, t = c
        return OpAST("kernel.splat", operands=[v], result_types=[t])

    def kernel_extract(self, c):
        v, pos, t = c
        return OpAST("kernel.extract", operands=[v], attrs={"position": tuple(pos)}, result_types=[t])

    def kernel_insert(self, c):
        e, v, pos, t = c
        return OpAST("kernel.insert", operands=[e, v], attrs={"position": tuple(pos)}, result_types=[t])

    def kernel_reduce(self, c):
        kind, v, axes, init, t = c
        if not isinstance(t, TensorType):
            raise error(f"kernel.reduce reduces a register tile, not {t}", self.loc_of(kind))
        axes = tuple(axes) if axes is not None else tuple(range(t.rank))
        attrs = {"kind": str(kind), "axes": axes}
        if init is None:
            return OpAST("kernel.reduce", operands=[v], attrs=attrs, operand_types=[t])
        (acc_t,) = K.ReduceOp.infer_result_types([t], attrs)
        return OpAST("kernel.reduce", operands=[v, init], attrs=attrs, operand_types=[t, acc_t])

    def kernel_reshape(self, c):
        v, src, dst = c
        return OpAST("kernel.reshape", operands=[v], operand_types=[src], result_types=[dst])

    # ---- control flow -------------------------------------------------------------------------------------------
    def kernel_yield(self, c):
        return OpAST("kernel.yield", operands=c[0] or [], result_types=[])

    def kernel_for(self, c):
        iv, lo, hi, step, *rest = c
        carries = [x for x in rest if isinstance(x, tuple)]
        attrs, region = rest[-2], rest[-1]
        (lower, upper), refs = _bind([[lo], [hi]], self.loc_of(iv))
        types = [t for _, _, t in carries]
        a = {**_attrs(attrs), "lower": lower, "upper": upper, "step": int(step) if step is not None else 1}
        args = [(self.ref(iv), index)] + [(name, t) for name, _, t in carries]
        return OpAST(
            "kernel.for",
            operands=refs + [init for _, init, _ in carries],
            attrs=a,
            result_types=types,
            regions=[region.with_entry_args(args)],
        )

    def kernel_if(self, c):
        cond, types, attrs, then, other = c
        if other is None:  # an if without else still has its (empty) else region
            other = RegionAST([BlockAST()])
        return OpAST("kernel.if", operands=[cond], attrs=_attrs(attrs), result_types=types or [], regions=[then, other])

    # ---- memory -------------------------------------------------------------------------------------------------
    def kernel_smem(self, c):
        dynamic, t, attrs = c
        a = _attrs(attrs)
        if dynamic is not None:
            a["dynamic"] = UNIT
        return OpAST("kernel.smem", attrs=a, result_types=[t])

    def kernel_smem_data(self, c):
        t, swizzle_kw, *bits = c
        if not isinstance(t, TensorType):
            return t  # the verifier names the mistake, at the op
        swizzle = tuple(int(b) for b in bits) if swizzle_kw is not None else ()
        try:
            return SmemType(t.dtype, t.shape, swizzle)
        except ValueError as e:
            if swizzle_kw is None:
                return t
            raise error(str(e), self.loc_of(swizzle_kw)) from None

    def kernel_smem_mbarrier(self, c):
        return MbarrierType(int(c[0]))

    def kernel_load(self, c):
        mem, idx, attrs, t = c
        (m,), refs = _bind([idx], mem.loc)
        return OpAST("kernel.load", operands=[mem, *refs], attrs={**_attrs(attrs), "index": m}, result_types=[t])

    def kernel_store(self, c):
        v, mem, idx, attrs = c
        (m,), refs = _bind([idx], mem.loc)
        return OpAST("kernel.store", operands=[v, mem, *refs], attrs={**_attrs(attrs), "index": m}, result_types=[])

    def kernel_atomic(self, c):
        kind, v, mem, idx, attrs = c
        (m,), refs = _bind([idx], mem.loc)
        a = {**_attrs(attrs), "kind": str(kind), "index": m}
        return OpAST("kernel.atomic", operands=[v, mem, *refs], attrs=a, result_types=[])

    def kernel_barrier(self, c):
        return OpAST("kernel.barrier", result_types=[])

    def kernel_fence(self, c):
        return OpAST("kernel.fence_proxy_async", result_types=[])

    def kernel_shfl(self, c):
        name, v, lane, attrs, t = c
        (m,), refs = _bind([[lane]], v.loc)
        return OpAST(str(name), operands=[v, *refs], attrs={**_attrs(attrs), "lane": m}, result_types=[t])

    # ---- asynchronous copies, mbarriers, TMA --------------------------------------------------------------------
    def kernel_cp_async(self, c):
        src, si, dst, di, attrs, chunk = c
        (sm, dm), refs = _bind([si, di], src.loc)
        a = {**_attrs(attrs), "src_index": sm, "dst_index": dm, "chunk": chunk}
        return OpAST("kernel.cp_async", operands=[src, dst, *refs], attrs=a, result_types=[])

    def kernel_cp_async_commit(self, c):
        return OpAST("kernel.cp_async_commit", result_types=[])

    def kernel_cp_async_wait(self, c):
        return OpAST("kernel.cp_async_wait", attrs={"pending": int(c[0])}, result_types=[])

    def kernel_mbarrier_init(self, c):
        bar, i, count = c
        (m,), refs = _bind([[i]], bar.loc)
        return OpAST(
            "kernel.mbarrier_init", operands=[bar, *refs], attrs={"index": m, "count": int(count)}, result_types=[]
        )

    def kernel_mbarrier_arrive(self, c):
        bar, i, tx = c
        (m,), refs = _bind([[i]], bar.loc)
        a = {"index": m} | ({"expect_tx": int(tx)} if tx is not None else {})
        return OpAST("kernel.mbarrier_arrive", operands=[bar, *refs], attrs=a, result_types=[])

    def kernel_mbarrier_wait(self, c):
        bar, i, parity = c
        (m, pm), refs = _bind([[i], [parity]], bar.loc)
        return OpAST("kernel.mbarrier_wait", operands=[bar, *refs], attrs={"index": m, "parity": pm}, result_types=[])

    def kernel_tma_load(self, c):
        tmap, coords, dst, di, bar, bi = c
        (cm, dm, bm), refs = _bind([coords, di or [], [bi]], tmap.loc)
        a = {"coords": cm, "dst_index": dm, "bar_index": bm}
        return OpAST("kernel.tma_load", operands=[tmap, dst, bar, *refs], attrs=a, result_types=[])

    # ---- tensor cores -------------------------------------------------------------------------------------------
    def kernel_frag_load(self, c):
        mem, idx, stride, transpose, attrs, t = c
        (m,), refs = _bind([idx], mem.loc)
        a = {**_attrs(attrs), "index": m, **_frag_options(stride, transpose)}
        return OpAST("kernel.frag_load", operands=[mem, *refs], attrs=a, result_types=[t])

    def kernel_frag_store(self, c):
        frag, mem, idx, stride, transpose, attrs = c
        (m,), refs = _bind([idx], mem.loc)
        a = {**_attrs(attrs), "index": m, **_frag_options(stride, transpose)}
        return OpAST("kernel.frag_store", operands=[frag, mem, *refs], attrs=a, result_types=[])

    def kernel_ldmatrix(self, c):
        mem, idx, transpose, attrs, t = c
        (m,), refs = _bind([idx], mem.loc)
        a = {**_attrs(attrs), "index": m, **_frag_options(None, transpose)}
        return OpAST("kernel.ldmatrix", operands=[mem, *refs], attrs=a, result_types=[t])

    def kernel_mma(self, c):
        a, b, acc, t = c
        return OpAST("kernel.mma", operands=[a, b, acc], result_types=[t])

    def kernel_wgmma(self, c):
        a, ia, b, ib, transpose, acc, t = c
        (ma, mb), refs = _bind([ia or [], ib], a.loc)  # A in registers has no index
        attrs = {"index_a": ma, "index_b": mb, **_frag_options(None, transpose)}
        return OpAST("kernel.wgmma", operands=[a, b, acc, *refs], attrs=attrs, result_types=[t])

    def kernel_wgmma_fence(self, c):
        return OpAST("kernel.wgmma_fence", result_types=[])

    def kernel_wgmma_commit(self, c):
        return OpAST("kernel.wgmma_commit", result_types=[])

    def kernel_wgmma_wait(self, c):
        return OpAST("kernel.wgmma_wait", attrs={"pending": int(c[0])}, result_types=[])

    def kernel_setmaxnreg(self, c):
        return OpAST("kernel.setmaxnreg", attrs={"action": str(c[0]), "count": int(c[1])}, result_types=[])

    # ---- programmatic dependent launch --------------------------------------------------------------------------
    def kernel_griddep_wait(self, c):
        return OpAST("kernel.griddepcontrol_wait", result_types=[])

    def kernel_griddep_launch(self, c):
        return OpAST("kernel.griddepcontrol_launch_dependents", result_types=[])

    def kernel_cluster_barrier(self, c):
        return OpAST("kernel.cluster_barrier", result_types=[])

    def kernel_cluster_map(self, c):
        mem, rank = c
        (m,), refs = _bind([[rank]], mem.loc)
        return OpAST("kernel.cluster_map", operands=[mem, *refs], attrs={"rank": m})

    def kernel_store_async(self, c):
        v, mem, idx, bar, bi, rank = c
        (mi, mb, mr), refs = _bind([idx, [bi], [rank]], mem.loc)
        attrs = {"index": mi, "bar_index": mb, "rank": mr}
        return OpAST("kernel.store_async", operands=[v, mem, bar, *refs], attrs=attrs, result_types=[])

    def kernel_prefetch_l2(self, c):
        mem, i, n = c
        (mi, mn), refs = _bind([[i], [n]], mem.loc)
        return OpAST("kernel.prefetch_l2", operands=[mem, *refs], attrs={"index": mi, "bytes": mn}, result_types=[])


def _frag_options(stride, transpose) -> dict:
    out = {}
    if stride is not None:
        out["stride"] = int(stride)
    if transpose is not None:
        out["transpose"] = UNIT
    return out
