"""Every torch-to-tensor decomposition pass, on its own: on programs of hypothesis-chosen shapes, dtypes and
arguments, the interpreter gives the same answer before the pass (PyTorch eager on each ATen op) and after it
(the tensor ops it produced, run by the tensor interpreter; any torch op left runs in eager)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irforge.diagnostics import IRForgeError
from irforge.parser import parse_module
from irforge.testing import check_pipeline

FLOAT = st.sampled_from(["f32", "f16", "bf16"])
DIM = st.sampled_from([1, 2, 3, 5, 7])
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


def t(dtype, shape) -> str:
    return f"{dtype}[{','.join(map(str, shape))}]"


def program(args, lines, results) -> str:
    """A func.func @forward with `args` [(name, type)], body `lines`, returning `results` [(name, type)]."""
    sig = ", ".join(f"%{n}: {ty}" for n, ty in args)
    outs = ", ".join(ty for _, ty in results)
    outs = outs if len(results) == 1 else f"({outs})"
    body = "".join(f"  {ln}\n" for ln in lines)
    return f"func.func @forward({sig}) -> {outs} {{\n{body}  func.return {', '.join('%' + n for n, _ in results)}\n}}\n"


def check(text: str, pipeline: str, seeds=(0, 1)):
    after = check_pipeline(parse_module(text), pipeline, seeds=seeds)
    return after


def lowered(module, prefix="torch.aten."):
    return not any(op.name.startswith(prefix) for op in module.walk())


# ---- composites ------------------------------------------------------------------------------------------------
@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), st.booleans(), st.sampled_from(["none", "1e-05"]))
def test_rms_norm(dtype, shape, weight, eps):
    n = shape[-1]
    w = ", %w" if weight else ", none"
    text = program(
        [("x", t(dtype, shape)), ("w", t(dtype, [n]))],
        [f"%y = torch.aten.rms_norm(%x, [{n}]{w}, {eps}) : {t(dtype, shape)}"],
        [("y", t(dtype, shape))],
    )
    assert lowered(check(text, "decompose-rms-norm"))


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=2, max_size=3), st.integers(1, 2), st.booleans())
def test_layer_norm(dtype, shape, ndims, affine):
    norm = shape[-ndims:]
    wb = ", %w, %b" if affine else ", none, none"
    text = program(
        [("x", t(dtype, shape)), ("w", t(dtype, norm)), ("b", t(dtype, norm))],
        [f"%y = torch.aten.layer_norm(%x, [{', '.join(map(str, norm))}]{wb}, 1e-05, false) : {t(dtype, shape)}"],
        [("y", t(dtype, shape))],
    )
    assert lowered(check(text, "decompose-layer-norm"))


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), st.data(), st.sampled_from(["softmax.int", "log_softmax.int"]))
def test_softmax(dtype, shape, data, op):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    text = program(
        [("x", t(dtype, shape))], [f"%y = torch.aten.{op}(%x, {dim}) : {t(dtype, shape)}"], [("y", t(dtype, shape))]
    )
    assert lowered(check(text, "decompose-softmax"))


@SETTINGS
@given(FLOAT, DIM, DIM, DIM, st.lists(st.sampled_from([1, 2, 3]), max_size=2), st.booleans())
def test_matmul_broadcasts_batches(dtype, m, k, n, batch, broadcast_w):
    wbatch = [1] * len(batch) if broadcast_w else batch
    text = program(
        [("a", t(dtype, [*batch, m, k])), ("b", t(dtype, [*wbatch, k, n]))],
        [f"%y = torch.aten.matmul(%a, %b) : {t(dtype, [*batch, m, n])}"],
        [("y", t(dtype, [*batch, m, n]))],
    )
    assert lowered(check(text, "decompose-matmul"))


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), DIM, st.booleans())
def test_linear(dtype, xshape, n, bias):
    k = xshape[-1]
    out = [*xshape[:-1], n]
    text = program(
        [("x", t(dtype, xshape)), ("w", t(dtype, [n, k])), ("b", t(dtype, [n]))],
        [f"%y = torch.aten.linear(%x, %w{', %b' if bias else ''}) : {t(dtype, out)}"],
        [("y", t(dtype, out))],
    )
    assert lowered(check(text, "decompose-matmul"))


@SETTINGS
@given(DIM, DIM, DIM, st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([1.0, 2.0]))
def test_addmm_and_bmm(m, k, n, beta, alpha):
    text = program(
        [("c", t("f32", [n])), ("a", t("f32", [m, k])), ("b", t("f32", [k, n])), ("p", t("f32", [2, m, k]))],
        [
            f"%y = torch.aten.addmm(%c, %a, %b, beta = {beta}, alpha = {alpha}) : {t('f32', [m, n])}",
            f"%q = torch.aten.expand(%b, [2, {k}, {n}]) : {t('f32', [2, k, n])}",
            f"%z = torch.aten.bmm(%p, %q) : {t('f32', [2, m, n])}",
        ],
        [("y", t("f32", [m, n])), ("z", t("f32", [2, m, n]))],
    )
    after = check(text, "decompose-matmul")
    assert not any(op.name in ("torch.aten.addmm", "torch.aten.bmm") for op in after.walk())


@SETTINGS
@given(
    FLOAT, DIM, DIM, st.sampled_from([4, 8]), st.sampled_from([(2, 2), (4, 2), (3, 1)]), st.booleans(), st.booleans()
)
def test_attention(dtype, seq_q, seq_k, e, heads, causal, with_mask):
    hq, hkv = heads
    q, k = t(dtype, [1, hq, seq_q, e]), t(dtype, [1, hkv, seq_k, e])
    mask = ", %m" if with_mask else ", none"
    gqa = ", enable_gqa = true" if hq != hkv else ""
    out = t(dtype, [1, hq, seq_q, e])
    text = program(
        [("q", q), ("k", k), ("v", k), ("m", t(dtype, [seq_q, seq_k]))],
        [f"%y = torch.aten.scaled_dot_product_attention(%q, %k, %v{mask}, 0.0, {str(causal).lower()}{gqa}) : {out}"],
        [("y", out)],
    )
    assert lowered(check(text, "decompose-attention"))


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3))
def test_silu(dtype, shape):
    ty = t(dtype, shape)
    text = program([("x", ty)], [f"%y = torch.aten.silu(%x) : {ty}"], [("y", ty)])
    assert lowered(check(text, "decompose-silu"))


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), st.sampled_from(["none", "tanh"]))
def test_gelu(dtype, shape, approximate):
    ty = t(dtype, shape)
    text = program([("x", ty)], [f'%y = torch.aten.gelu(%x, approximate = "{approximate}") : {ty}'], [("y", ty)])
    assert lowered(check(text, "decompose-gelu"))


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=2), st.sampled_from([0, 1, 2, 3, -1, -2, 0.5, -0.5, 1.5, 2.7]))
def test_pow(dtype, shape, exponent):
    ty = t(dtype, shape)
    text = program(
        [("x", ty)],
        [  # positive bases, so fractional powers stay real
            f"%a = torch.aten.abs(%x) : {ty}",
            f"%p = torch.aten.add.Tensor(%a, 0.5) : {ty}",
            f"%y = torch.aten.pow.Tensor_Scalar(%p, {exponent}) : {ty}",
            f"%z = torch.aten.pow.Tensor_Tensor(%p, %x) : {ty}",
        ],
        [("y", ty), ("z", ty)],
    )
    assert lowered(check(text, "decompose-pow"), "torch.aten.pow")


# ---- reductions ------------------------------------------------------------------------------------------------
@SETTINGS
@given(
    FLOAT,
    st.lists(DIM, min_size=1, max_size=3),
    st.data(),
    st.booleans(),
    st.sampled_from(["sum.dim_IntList", "mean.dim", "amax", "amin", "var.correction"]),
)
def test_reductions(dtype, shape, data, keepdim, op):
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    out = (
        [1 if i in dims else n for i, n in enumerate(shape)]
        if keepdim
        else [n for i, n in enumerate(shape) if i not in dims]
    )
    kd = str(keepdim).lower()
    call = (
        f"torch.aten.var.correction(%x, {dims}, correction = 1, keepdim = {kd})"
        if op == "var.correction"
        else f"torch.aten.{op}(%x, {dims}, {kd})"
    )
    text = program([("x", t(dtype, shape))], [f"%y = {call} : {t(dtype, out)}"], [("y", t(dtype, out))])
    assert lowered(check(text, "decompose-reductions"))


@SETTINGS
@given(st.lists(DIM, min_size=1, max_size=3), st.data(), st.booleans())
def test_max_dim_and_argmax(shape, data, keepdim):
    dim = data.draw(st.integers(0, len(shape) - 1))
    out = (
        [1 if i == dim else n for i, n in enumerate(shape)] if keepdim else [n for i, n in enumerate(shape) if i != dim]
    )
    kd = str(keepdim).lower()
    text = program(
        [("x", t("f32", shape))],
        [
            f"%v, %i = torch.aten.max.dim(%x, {dim}, {kd}) : ({t('f32', out)}, {t('i64', out)})",
            f"%a = torch.aten.argmin(%x, {dim}, {kd}) : {t('i64', out)}",
            f"%s = torch.aten.sum.dim_IntList(%x, none) : {t('f32', [])}",
        ],
        [("v", t("f32", out)), ("i", t("i64", out)), ("a", t("i64", out)), ("s", t("f32", []))],
    )
    assert lowered(check(text, "decompose-reductions"))


# ---- gathers -----------------------------------------------------------------------------------------------------
@SETTINGS
@given(FLOAT, DIM, DIM, st.lists(DIM, min_size=1, max_size=2))
def test_embedding_and_index_select(dtype, rows, width, ids_shape):
    table = t(dtype, [rows, width])
    text = program(
        [("w", table), ("ids", t("i64", ids_shape)), ("j", t("i64", [3]))],
        [
            f"%e = torch.aten.embedding(%w, %ids) : {t(dtype, [*ids_shape, width])}",
            f"%s = torch.aten.index_select(%w, 0, %j) : {t(dtype, [3, width])}",
        ],
        [("e", t(dtype, [*ids_shape, width])), ("s", t(dtype, [3, width]))],
    )
    assert lowered(check(text, "decompose-embedding"))


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), st.data())
def test_advanced_indexing(dtype, shape, data):
    """x[i0, None, i2, ...] with several index tensors broadcasting together; the result shape is PyTorch's."""
    import torch

    rank = len(shape)
    picked = data.draw(st.lists(st.booleans(), min_size=rank, max_size=rank).filter(any))
    last = max(i for i, p in enumerate(picked) if p)
    bshape = data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=2))
    idx_shapes = [bshape[data.draw(st.integers(0, len(bshape) - 1)) :] if p else None for p in picked[: last + 1]]
    for i, p in enumerate(idx_shapes):  # some broadcast: a size-1 dimension against B's
        if p and data.draw(st.booleans()):
            idx_shapes[i] = [1] * len(p)
    empty = [torch.zeros(p, dtype=torch.long) if p is not None else None for p in idx_shapes]
    out = list(torch.ops.aten.index.Tensor(torch.empty(shape), empty).shape)
    args = [("x", t(dtype, shape))] + [(f"i{k}", t("i64", p)) for k, p in enumerate(idx_shapes) if p is not None]
    given_names = [f"%i{k}" if p is not None else "none" for k, p in enumerate(idx_shapes)]
    text = program(
        args,
        [f"%y = torch.aten.index.Tensor(%x, [{', '.join(given_names)}]) : {t(dtype, out)}"],
        [("y", t(dtype, out))],
    )
    rng = np.random.default_rng(len(text))
    values = {f"i{k}": rng.integers(-n, n, size=p) for k, (n, p) in enumerate(zip(shape, idx_shapes)) if p is not None}
    after = check_pipeline(parse_module(text), "decompose-embedding", inputs=values, seeds=(0, 1))
    assert lowered(after)


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), st.data())
def test_scatters(dtype, shape, data):
    """index_put through one index tensor and index_copy, with distinct (possibly negative) positions."""
    rank = len(shape)
    dim = data.draw(st.integers(0, rank - 1))
    n = shape[dim]
    k = data.draw(st.integers(1, n))
    picked = data.draw(st.permutations(range(n)))[:k]
    negative = [p - n if data.draw(st.booleans()) else p for p in picked]  # x[..., -1] is x's last
    upd = [k if i == dim else s for i, s in enumerate(shape)]
    nones = ", ".join(["none"] * dim + ["%neg"])
    text = program(
        [("x", t(dtype, shape)), ("neg", t("i64", [k])), ("pos", t("i64", [k])), ("v", t(dtype, upd))],
        [
            f"%a = torch.aten.index_put(%x, [{nones}], %v) : {t(dtype, shape)}",
            f"%b = torch.aten.index_copy(%x, {dim}, %pos, %v) : {t(dtype, shape)}",
        ],
        [("a", t(dtype, shape)), ("b", t(dtype, shape))],
    )
    values = {"neg": np.array(negative), "pos": np.array(picked), "x": None, "v": None}
    after = check_pipeline(parse_module(text), "decompose-scatter", inputs=values, seeds=(0, 1))
    assert lowered(after)


# ---- scans -------------------------------------------------------------------------------------------------------
@SETTINGS
@given(st.sampled_from(["f32", "bf16", "i64", "bool"]), st.lists(DIM, min_size=1, max_size=3), st.data())
def test_scans(dtype, shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    out = "i64" if dtype in ("i64", "bool") else dtype
    text = program(
        [("x", t(dtype, shape))],
        [
            f"%s = torch.aten.cumsum(%x, {dim}) : {t(out, shape)}",
            f"%p = torch.aten.cumprod(%x, {dim}) : {t(out, shape)}",
        ],
        [("s", t(out, shape)), ("p", t(out, shape))],
    )
    assert lowered(check(text, "decompose-scans"))


# ---- views -------------------------------------------------------------------------------------------------------
@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=2, max_size=3), st.data())
def test_views(dtype, shape, data):
    r = len(shape)
    perm = data.draw(st.permutations(range(r)))
    dim = data.draw(st.integers(0, r - 1))
    n = shape[dim]
    start = data.draw(st.integers(0, n - 1))
    step = data.draw(st.integers(1, 2))
    length = (n - start + step - 1) // step
    sliced = [length if i == dim else s for i, s in enumerate(shape)]
    numel = 1
    for s in shape:
        numel *= s
    pads = data.draw(st.lists(st.integers(-1, 2), min_size=2, max_size=2))
    if shape[-1] + pads[0] + pads[1] <= 0:
        pads = [0, 1]
    padded = [*shape[:-1], shape[-1] + pads[0] + pads[1]]
    catted = [2 * s if i == dim else s for i, s in enumerate(shape)]
    ty = t(dtype, shape)
    text = program(
        [("x", ty)],
        [
            f"%p = torch.aten.permute(%x, {list(perm)}) : {t(dtype, [shape[i] for i in perm])}",
            f"%v = torch.aten.view(%x, [{numel}]) : {t(dtype, [numel])}",
            f"%s = torch.aten.slice.Tensor(%x, {dim}, {start}, {n}, {step}) : {t(dtype, sliced)}",
            f"%c = torch.aten.cat([%x, %x], {dim}) : {t(dtype, catted)}",
            f"%f = torch.aten.flip(%x, [{dim}]) : {ty}",
            f"%o = torch.aten.roll(%x, [{start + 1}], [{dim}]) : {ty}",
            f"%d = torch.aten.constant_pad_nd(%x, {pads}, 0.5) : {t(dtype, padded)}",
            f"%e = torch.aten.unsqueeze(%x, 1) : {t(dtype, [shape[0], 1, *shape[1:]])}",
            f"%l = torch.aten.tril(%x, {start - 1}) : {ty}",
        ],
        [
            ("p", t(dtype, [shape[i] for i in perm])),
            ("v", t(dtype, [numel])),
            ("s", t(dtype, sliced)),
            ("c", t(dtype, catted)),
            ("f", ty),
            ("o", ty),
            ("d", t(dtype, padded)),
            ("e", t(dtype, [shape[0], 1, *shape[1:]])),
            ("l", ty),
        ],
    )
    assert lowered(check(text, "decompose-views", seeds=(0,)))


# ---- pointwise, casts, factories --------------------------------------------------------------------------------
BINARY = ["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "maximum", "minimum", "gt.Tensor", "le.Tensor"]


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), st.data(), st.sampled_from(BINARY))
def test_pointwise_broadcasts(dtype, shape, data, op):
    # the second operand broadcasts: trailing dims, some set to 1
    k = data.draw(st.integers(0, len(shape)))
    other = [1 if data.draw(st.booleans()) else s for s in shape[len(shape) - k :]]
    rdtype = "bool" if op.startswith(("gt", "le")) else dtype
    text = program(
        [("x", t(dtype, shape)), ("y", t(dtype, other))],
        [
            f"%z = torch.aten.{op}(%x, %y) : {t(rdtype, shape)}",
            f"%s = torch.aten.mul.Tensor(%x, 0.1) : {t(dtype, shape)}",
            f"%w = torch.aten.where.self(%z, %x, %s) : {t(dtype, shape)}"
            if rdtype == "bool"
            else f"%w = torch.aten.exp(%z) : {t(dtype, shape)}",
        ],
        [("z", t(rdtype, shape)), ("w", t(dtype, shape)), ("s", t(dtype, shape))],
    )
    assert lowered(check(text, "decompose-pointwise"))


@SETTINGS
@given(
    st.sampled_from(["f32", "f16", "bf16", "i64", "i32", "bool"]),
    st.sampled_from(["f32", "f16", "bf16", "i64", "bool"]),
)
def test_casts(src, dst):
    text = program(
        [("x", t("f32", [3, 4]))],
        [
            f"%m = torch.aten.mul.Tensor(%x, 3.0) : {t('f32', [3, 4])}",
            f"%a = torch.aten._to_copy(%m, dtype = {src}) : {t(src, [3, 4])}",
            f"%b = torch.aten._to_copy(%a, dtype = {dst}) : {t(dst, [3, 4])}",
        ],
        [("b", t(dst, [3, 4]))],
    )
    assert lowered(check(text, "decompose-casts"), "torch.aten._to_copy")


@SETTINGS
@given(DIM, st.sampled_from([0, 2, -3]), st.sampled_from([1, 2, 3]), st.sampled_from(["i64", "f32"]))
def test_factories(n, start, step, dtype):
    end = start + n * step
    text = program(
        [("x", t("f32", [n]))],
        [
            f"%a = torch.aten.arange.start_step({start}, {end}, {step}, dtype = {dtype}) : {t(dtype, [n])}",
            f"%f = torch.aten.full([2, {n}], 1.5, dtype = f32) : {t('f32', [2, n])}",
            f"%z = torch.aten.zeros_like(%x) : {t('f32', [n])}",
        ],
        [("a", t(dtype, [n])), ("f", t("f32", [2, n])), ("z", t("f32", [n]))],
    )
    assert lowered(check(text, "decompose-factories"))


def test_params_become_tensor_params():
    text = program(
        [("x", t("f32", [4]))],
        ["%w = torch.param @layer.weight : f32[4]", "%y = torch.aten.mul.Tensor(%x, %w) : f32[4]"],
        [("y", t("f32", [4]))],
    )
    after = check(text, "decompose-params")
    assert [op.name for op in after.walk()].count("tensor.param") == 1


def test_finalize_refuses_leftover_torch_ops():
    text = program([("x", t("f32", [4]))], ["%y = torch.aten.cumsum(%x, 0) : f32[4]"], [("y", t("f32", [4]))])
    with pytest.raises(IRForgeError, match=r"unsupported torch op 'aten\.cumsum'") as e:
        check(text, "torch-to-tensor-finalize")
    assert e.value.loc.file_line_col().line == 2


def test_whole_pipeline_on_mixed_program():
    text = program(
        [("x", t("bf16", [2, 6])), ("w", t("bf16", [6, 6]))],
        [
            "%h = torch.aten.linear(%x, %w) : bf16[2,6]",
            '%g = torch.aten.gelu(%h, approximate = "tanh") : bf16[2,6]',
            "%s = torch.aten._softmax(%g, -1, false) : bf16[2,6]",
        ],
        [("s", t("bf16", [2, 6]))],
    )
    after = check(text, "torch-to-tensor")
    assert all(op.dialect in ("tensor", "func", "builtin") for op in after.walk())


@SETTINGS
@given(FLOAT, st.integers(1, 4), DIM, st.lists(DIM, max_size=2), st.booleans())
def test_batch_norm_inference(dtype, batch, channels, spatial, affine):
    shape = [batch, channels, *spatial]
    c = t(dtype, [channels])
    wb = "%w, %b" if affine else "none, none"
    text = program(
        [("x", t(dtype, shape)), ("w", c), ("b", c), ("m", c), ("v", c)],
        [
            f"%a = torch.aten.abs(%v) : {c}",  # a variance is not negative
            f"%y, %s, %r = torch.aten._native_batch_norm_legit_no_training(%x, {wb}, %m, %a, 0.1, 1e-05)"
            f" : ({t(dtype, shape)}, {t(dtype, [0])}, {t(dtype, [0])})",
        ],
        [("y", t(dtype, shape))],
    )
    assert lowered(check(text, "decompose-batch-norm"), "torch.aten._native")


@SETTINGS
@given(FLOAT, st.lists(DIM, min_size=1, max_size=3), st.sampled_from([2.0, 1, 3, 0.5, 0, float("inf"), float("-inf")]))
def test_vector_norm(dtype, shape, p):
    ord_ = {float("inf"): "inf", float("-inf"): "-inf"}.get(p, p)
    text = program(
        [("x", t(dtype, shape))],
        [
            f"%n = torch.aten.linalg_vector_norm(%x, {ord_}) : {t(dtype, [])}",
            f"%k = torch.aten.linalg_vector_norm(%x, {ord_}, [-1], true) : {t(dtype, [*shape[:-1], 1])}",
        ],
        [("n", t(dtype, [])), ("k", t(dtype, [*shape[:-1], 1]))],
    )
    assert lowered(check(text, "decompose-reductions"))
