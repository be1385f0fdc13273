"""Tensor-core examples: products on mma.sync (fragments loaded element by element, or with ldmatrix) and on
wgmma (both operands in shared memory, or A in registers)."""

from __future__ import annotations

import numpy as np

from irforge.types import ScalarType

from .base import Example, _header, _rand


def mma_linear(m: int, n: int, k: int, dtype: str = "bf16") -> Example:
    """y = a @ w^T (a: [m, k], w: [n, k] as nn.Linear stores it; f32 result) with mma.sync m16n8k16: one warp per
    16 x 8 output tile, staging 16 x 16 slices of a and 8 x 16 slices of w in shared memory."""
    assert m % 16 == 0 and n % 8 == 0 and k % 16 == 0
    head = _header(
        "k_mma_linear",
        [f"%a: !kernel.ptr<{dtype}>", f"%w: !kernel.ptr<{dtype}>", "%y: !kernel.ptr<f32>"],
        f"{n // 8}, {m // 16}",
        "32",
    )
    ir = f"""{head} {{
  %as = kernel.smem {dtype}[16,16]
  %ws = kernel.smem {dtype}[8,16]
  %lane = kernel.thread_id x
  %tn = kernel.block_id x
  %tm = kernel.block_id y
  %zero = kernel.const 0.0 : !kernel.frag<"acc", f32, [16, 8]>
  %acc = kernel.for %k0 in 0 .. {k} step 16 carry(%c <- %zero : !kernel.frag<"acc", f32, [16, 8]>) {{
    %av = kernel.load %a[(%tm * 16 + %lane floordiv 2) * {k} + %k0 + %lane mod 2 * 8] : {dtype}[8]
    kernel.store %av, %as[%lane floordiv 2, %lane mod 2 * 8]
    %wv = kernel.load %w[(%tn * 8 + %lane floordiv 4) * {k} + %k0 + %lane mod 4 * 4] : {dtype}[4]
    kernel.store %wv, %ws[%lane floordiv 4, %lane mod 4 * 4]
    kernel.barrier
    %fa = kernel.frag_load %as[0, 0] : !kernel.frag<"a", {dtype}, [16, 16]>
    %fb = kernel.frag_load %ws[0, 0] transpose : !kernel.frag<"b", {dtype}, [16, 8]>
    %c2 = kernel.mma %fa, %fb, %c : !kernel.frag<"acc", f32, [16, 8]>
    kernel.barrier
    kernel.yield %c2
  }}
  kernel.frag_store %acc, %y[%tm * {16 * n} + %tn * 8] stride {n}
}}
func.func @forward(%a: {dtype}[{m},{k}], %w: {dtype}[{n},{k}]) -> f32[{m},{n}] {{
  %y = kernel.alloc : f32[{m},{n}]
  kernel.launch @k_mma_linear(%a, %w, %y)
  func.return %y
}}
"""
    return Example(
        f"mma_linear_{dtype}",
        ir,
        lambda rng: [_rand(rng, (m, k), dtype), _rand(rng, (n, k), dtype)],
        lambda ins: [ins[0].astype(np.float64) @ ins[1].astype(np.float64).T],
        1e-5,
        (m * k + n * k) * ScalarType(dtype).bytes + m * n * 4,
        lambda a, w: [(a.float() @ w.float().T)],
    )


def ldmatrix_mma(wm: int, wn: int, k: int, a_t: bool = False, b_t: bool = True, dtype: str = "bf16") -> Example:
    """y = a @ b for one warp's [wm, wn] tile, its fragments loaded with ldmatrix: a stored [wm, k] (or [k, wm] when
    `a_t`), b stored [k, wn] (or [wn, k] when `b_t`, as nn.Linear weights are), both copied whole into shared memory
    first; (wm / 16) x (wn / 8) mma atoms a step of 16 along k."""
    assert wm % 16 == 0 and wn % 8 == 0 and k % 16 == 0
    a_shape, b_shape = ((k, wm) if a_t else (wm, k)), ((wn, k) if b_t else (k, wn))
    fa, fb, acc = (f'!kernel.frag<"a", {dtype}, [{wm}, 16]>', f'!kernel.frag<"b", {dtype}, [16, {wn}]>',
                   f'!kernel.frag<"acc", f32, [{wm}, {wn}]>')  # fmt: skip
    a_at = "[%k0, 0] transpose" if a_t else "[0, %k0]"
    b_at = "[0, %k0] transpose" if b_t else "[%k0, 0]"

    def fill(src: str, dst: str, shape) -> str:
        rows, cols = shape
        return f"""  kernel.for %e_{src} in %lane .. {rows * cols} step 32 {{
    %v_{src} = kernel.load %{src}[%e_{src}] : {dtype}
    kernel.store %v_{src}, %{dst}[%e_{src} floordiv {cols}, %e_{src} mod {cols}]
  }}
"""

    head = _header("k_ldmatrix_mma", [f"%a: !kernel.ptr<{dtype}>", f"%b: !kernel.ptr<{dtype}>", "%y: !kernel.ptr<f32>"],
                   "1", "32")  # fmt: skip
    ir = f"""{head} {{
  %as = kernel.smem {dtype}[{a_shape[0]},{a_shape[1]}]
  %bs = kernel.smem {dtype}[{b_shape[0]},{b_shape[1]}]
  %lane = kernel.thread_id x
{fill("a", "as", a_shape)}{fill("b", "bs", b_shape)}  kernel.barrier
  %zero = kernel.const 0.0 : {acc}
  %d = kernel.for %k0 in 0 .. {k} step 16 carry(%c <- %zero : {acc}) {{
    %fa = kernel.ldmatrix %as{a_at} : {fa}
    %fb = kernel.ldmatrix %bs{b_at} : {fb}
    %c2 = kernel.mma %fa, %fb, %c : {acc}
    kernel.yield %c2
  }}
  kernel.frag_store %d, %y[0] stride {wn}
}}
func.func @forward(%a: {dtype}[{a_shape[0]},{a_shape[1]}], %b: {dtype}[{b_shape[0]},{b_shape[1]}]) -> f32[{wm},{wn}] {{
  %y = kernel.alloc : f32[{wm},{wn}]
  kernel.launch @k_ldmatrix_mma(%a, %b, %y)
  func.return %y
}}
"""

    def reference(ins):
        a, b = (x.astype(np.float64) for x in ins)
        return [(a.T if a_t else a) @ (b.T if b_t else b)]

    tag = ("t" if a_t else "n") + ("t" if b_t else "n")
    return Example(
        f"ldmatrix_mma_{tag}_{dtype}",
        ir,
        lambda rng: [_rand(rng, a_shape, dtype), _rand(rng, b_shape, dtype)],
        reference,
        1e-5,
        (wm * k + wn * k) * ScalarType(dtype).bytes + wm * wn * 4,
        lambda a, b: [(a.float().T if a_t else a.float()) @ (b.float().T if b_t else b.float())],
    )


def _wgmma_chunks(name: str, params: list[str], smem: str, copies: str, tx: int, step: str, n: int, k: int, bk: int,
                  dtype: str, warpgroups: int, inputs: str) -> str:  # fmt: skip
    """A wgmma example's kernel and host function: thread 0 has the copy engine bring each chunk of the K loop into
    shared memory (`copies`, `tx` bytes, into the buffers `smem` declares), every warpgroup runs `step` (its wgmmas
    of the chunk on its 64 rows `%row`, a step `%ks` of 16 at a time, into `%ci`), commits and waits for them before
    the next chunk overwrites the buffers; y [64 * warpgroups, n] in f32."""
    m = 64 * warpgroups
    acc = f'!kernel.frag<"acc", f32, [64, {n}], "wgmma">'
    head = _header(name, [*params, "%y: !kernel.ptr<f32>"], "1", f"{128 * warpgroups}")
    return f"""{head} {{
{smem}  %full = kernel.smem mbarrier[1]
  %t = kernel.thread_id x
  %c0 = kernel.const 0 : index
  %leader = kernel.eq %t, %c0 : bool
  kernel.if %leader {{
    kernel.mbarrier_init %full[0], 1
  }}
  kernel.barrier
  %row = kernel.index %t floordiv 128 * 64
  %zero = kernel.const 0.0 : {acc}
  %d = kernel.for %kc in 0 .. {k // bk} carry(%c <- %zero : {acc}) {{
    kernel.if %leader {{
      kernel.mbarrier_arrive %full[0] expect_tx {tx}
{copies}    }}
    kernel.mbarrier_wait %full[0], parity %kc mod 2
{step.replace("ACC", acc)}    kernel.wgmma_commit
    kernel.wgmma_wait 0
    kernel.barrier
    kernel.yield %c1
  }}
  kernel.frag_store %d, %y[%row * {n}] stride {n}
}}
func.func @forward({inputs}) -> f32[{m},{n}] {{
  %y = kernel.alloc : f32[{m},{n}]
  kernel.launch @{name}({", ".join(i.split(":")[0] for i in inputs.split(", "))}, %y)
  func.return %y
}}
"""


def _swizzle(span: int) -> str:
    """The `!kernel.smem` swizzle the copy engine writes rows of `span` bytes in."""
    return f"swizzle({(span // 16).bit_length() - 1}, 3, 3)"


def wgmma_linear(n: int, k: int, bk: int = 64, dtype: str = "bf16", warpgroups: int = 1) -> Example:
    """y = a @ b.T (a [64 * warpgroups, k], b [n, k] as nn.Linear keeps weights, f32 out) on wgmma: each chunk of
    `bk` columns of both copied into shared memory (rows of 2 * bk bytes, swizzled in that span: the layout the
    descriptors name), every warpgroup fences and issues bk / 16 wgmmas on its 64 rows, both tiles K-major."""
    span, m = 2 * bk, 64 * warpgroups
    ir = _wgmma_chunks(
        f"k_wgmma_linear_{dtype}",
        [f"%am: !kernel.tensormap<{dtype}, [{m}, {k}], [{m}, {bk}], {span}>",
         f"%bm: !kernel.tensormap<{dtype}, [{n}, {k}], [{n}, {bk}], {span}>"],
        f"  %as = kernel.smem {dtype}[{m},{bk}] {_swizzle(span)}\n"
        f"  %bs = kernel.smem {dtype}[{n},{bk}] {_swizzle(span)}\n",
        f"      kernel.tma_load %am[0, %kc * {bk}] -> %as, %full[0]\n"
        f"      kernel.tma_load %bm[0, %kc * {bk}] -> %bs, %full[0]\n",
        (m + n) * span,
        f"""    kernel.wgmma_fence
    %c1 = kernel.for %ks in 0 .. {bk // 16} carry(%ci <- %c : ACC) {{
      %ci2 = kernel.wgmma %as[%row, %ks * 16], %bs[0, %ks * 16], %ci : ACC
      kernel.yield %ci2
    }}
""",
        n, k, bk, dtype, warpgroups, f"%a: {dtype}[{m},{k}], %b: {dtype}[{n},{k}]",
    )  # fmt: skip
    return Example(
        f"wgmma_linear_{dtype}_n{n}_bk{bk}",
        ir,
        lambda rng: [_rand(rng, (m, k), dtype), _rand(rng, (n, k), dtype)],
        lambda ins: [ins[0].astype(np.float64) @ ins[1].astype(np.float64).T],
        1e-5,
        (m * k + n * k) * ScalarType(dtype).bytes + m * n * 4,
        lambda a, b: [a.float() @ b.float().T],
    )


def wgmma_registers_a(n: int, k: int, bk: int = 64, dtype: str = "bf16", warpgroups: int = 1) -> Example:
    """y = a @ v (a [64 * warpgroups, k], v [k, n] row-major, f32 out) on wgmma with A from registers and B
    MN-major, as attention's second product takes exp(x - m) and V: each chunk of `bk` rows of v copied into shared
    memory (rows of 2 * n bytes, swizzled in that span; rows over 128 bytes in blocks of 64 columns, a box each,
    the descriptor's LBO the distance between blocks), every warpgroup loads its A fragment of each step of 16 into
    registers, fences, and issues a wgmma reading v's tile transposed."""
    m, blocks = 64 * warpgroups, max(1, 2 * n // 128)
    cols = n // blocks
    span = 2 * cols
    frag_a = f'!kernel.frag<"a", {dtype}, [64, 16], "wgmma">'
    shape, at = (f"{blocks},{bk},{cols}", "0, ") if blocks > 1 else (f"{bk},{cols}", "")
    copies = "".join(
        f"      kernel.tma_load %vm[%kc * {bk}, {b * cols}] -> %vs{f'[{b}]' if blocks > 1 else ''}, %full[0]\n"
        for b in range(blocks)
    )
    ir = _wgmma_chunks(
        f"k_wgmma_registers_a_{dtype}",
        [f"%a: !kernel.ptr<{dtype}>", f"%vm: !kernel.tensormap<{dtype}, [{k}, {n}], [{bk}, {cols}], {span}>"],
        f"  %vs = kernel.smem {dtype}[{shape}] {_swizzle(span)}\n",
        copies,
        bk * 2 * n,
        f"""    %c1 = kernel.for %ks in 0 .. {bk // 16} carry(%ci <- %c : ACC) {{
      %fa = kernel.frag_load %a[%row * {k} + %kc * {bk} + %ks * 16] stride {k} : {frag_a}
      kernel.wgmma_fence
      %ci2 = kernel.wgmma %fa, %vs[{at}%ks * 16, 0] transpose, %ci : ACC
      kernel.yield %ci2
    }}
""",
        n, k, bk, dtype, warpgroups, f"%a: {dtype}[{m},{k}], %v: {dtype}[{k},{n}]",
    )  # fmt: skip
    return Example(
        f"wgmma_registers_a_{dtype}_n{n}_bk{bk}",
        ir,
        lambda rng: [_rand(rng, (m, k), dtype), _rand(rng, (k, n), dtype)],
        lambda ins: [ins[0].astype(np.float64) @ ins[1].astype(np.float64)],
        1e-5,
        (m * k + k * n) * ScalarType(dtype).bytes + m * n * 4,
        lambda a, v: [a.float() @ v.float()],
    )
