"""kernel-to-cuda's statements for values (`dialects/kernel/ops/values.py`): constants, elementwise math and
casts (f16/bf16 computed in float, rounded once per op), splats, reshapes, element access, and reductions of
register tiles (balanced trees, or folded into an accumulator)."""

from __future__ import annotations

from irforge.dialects.cuda.prelude import C_TYPES, HALF_TYPES
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.types import element_type

from irforge.scalar_ops import SCALAR_OPS
from irforge.types import ScalarType, TensorType

from .c_text import _is_array, _numel, c_type

_MONOID_C = {"add": "({a} + {b})", "mul": "({a} * {b})", "max": "irf_maximum({a}, {b})", "min": "irf_minimum({a}, {b})"}


def _literal(v, t: ScalarType, index_t: str) -> str:
    import numpy as np

    name = t.name
    if name == "bool":
        return "true" if v else "false"
    if not t.is_float:
        return f"{int(v)}LL" if name == "i64" or (name == "index" and index_t == "long long") else str(int(v))
    f = float(v)
    if name == "f64":
        if np.isnan(f) or np.isinf(f):
            bits = np.array([f]).view(np.uint64)[0]
            return f"__longlong_as_double(0x{int(bits):016x}LL)"
        return repr(f)
    if np.isnan(f) or np.isinf(f):
        bits = np.array([f], dtype=np.float32).view(np.uint32)[0]
        lit = f"__int_as_float(0x{int(bits):08x})"
    else:
        text = str(np.float32(f))
        lit = (text if any(c in text for c in ".en") else text + ".0") + "f"
    return lit if name == "f32" else f"{HALF_TYPES[C_TYPES[name]][1]}({lit})"


def _chained(op) -> bool:
    """Whether an elementwise math op of a tensor-core kernel's epilogue (outside every loop: at the kernel's top
    level or in a warp-specialized consumer's branch) has a tile read by one elementwise op of the same shape (math
    or a cast), element by element: it can be computed inside that op's element instead of into an array of its own
    (a user it broadcasts to would compute it again for each of its elements). A consumer's 128-register accumulator
    and a SiLU's 128 sigmoids as arrays spilled 324 bytes at 232 registers; chained, none. Inside loops the arrays
    stay: ptxas scheduled inlined chains worse in a SIMT attention's loops (2564 spill stores where the arrays had
    none)."""
    users = op.result.users
    return (
        not any(isinstance(p, K.ForOp) for p in op.ancestors())
        and len(op.result.uses) == 1
        and isinstance(users[0], (K.ScalarMathOp, K.CastOp))
        and users[0].parent is op.parent
        and isinstance(op.result.type, TensorType)
        and users[0].results[0].type.shape == op.result.type.shape
    )


class ValueStatements:
    """Mixed into the kernel emitter (it supplies `line`, `name`, `ctype`, `elem`, `declare`, `unrolled`, `inline`,
    `fragments`, `index_t`)."""

    def op_const(self, op):
        v, t = op.attributes["value"], op.result.type
        if isinstance(v, tuple):
            items = ", ".join(_literal(x, element_type(t), self.index_t) for x in v)
            self.line(f"const {self.ctype(t)} {self.name(op.result)}[{len(v)}] = {{{items}}};")
            return
        lit = _literal(v, element_type(t), self.index_t)
        self.declare(op.result, lambda i: lit)

    def scalar(self, op):
        name = op.scalar_op
        o = SCALAR_OPS[name]
        types = [element_type(v.type) for v in op.operands]
        half = any(t.name in ("f16", "bf16") for t in types)
        rt = element_type(op.result.type)

        def expr(i):
            args = [self.elem(v, i, op.result.type) for v in op.operands]
            if name == "select":
                return f"({args[0]} ? {args[1]} : {args[2]})"
            if not o.infix:
                return f"irf_{name}({', '.join(args)})"
            if half:  # f32 math, one rounding (the prelude's irf_ functions do the same for halves)
                args = [f"irf_f32({a})" for a in args]
                e = f"({args[0]} {o.cuda} {args[1]})"
                return f"{HALF_TYPES[C_TYPES[rt.name]][1]}({e})" if rt.name in ("f16", "bf16") else e
            return f"({args[0]} {o.cuda} {args[1]})"

        users = op.result.users
        if len(op.result.uses) == 1 and isinstance(users[0], K.ReduceOp) and users[0].init:
            self.inline[op.result] = expr  # folded element by element into an accumulator: no array of its own
            return
        if _is_array(op.result.type) and self.fragments and _chained(op):
            self.inline[op.result] = expr  # an epilogue's chain: one loop, no array between its ops
            return
        self.declare(op.result, expr)

    def op_cast(self, op):
        src, dst = element_type(op.input.type), element_type(op.result.type)
        self.declare(op.result, lambda i: self.convert(self.elem(op.input, i), src, dst))

    def convert(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        return x if src == dst else f"irf_cast<{c_type(dst, self.index_t)}>({x})"

    def op_splat(self, op):
        self.declare(op.result, lambda i: self.elem(op.input, i, op.result.type))

    def op_reshape(self, op):
        t = op.result.type
        self.line(f"const {self.ctype(t)} (&{self.name(op.result)})[{_numel(t)}] = {self.name(op.input)};")

    def op_extract(self, op):
        import numpy as np

        t = op.tile.type
        shape = t.shape if isinstance(t, TensorType) else (t.per_lane,)
        flat = int(np.ravel_multi_index(op.attributes["position"], shape))
        self.line(f"const {self.ctype(op.result.type)} {self.name(op.result)} = {self.name(op.tile)}[{flat}];")

    def op_insert(self, op):
        import numpy as np

        t = op.tile.type
        shape = t.shape if isinstance(t, TensorType) else (t.per_lane,)
        flat = int(np.ravel_multi_index(op.attributes["position"], shape))
        self.declare(op.result, lambda i: self.elem(op.tile, i))
        self.line(f"{self.name(op.result)}[{flat}] = {self.name(op.element)};")

    def op_reduce(self, op):
        import numpy as np

        t = op.input.type
        et = t.dtype
        half = et.name in ("f16", "bf16")
        acc_t = "float" if half else self.ctype(et)
        comb = _MONOID_C[op.attributes["kind"]]
        inline = self.inline.get(op.input)
        if inline is not None:
            get = (lambda i: f"irf_f32({inline(str(i))})") if half else (lambda i: inline(str(i)))
        else:
            src = self.name(op.input)
            get = (lambda i: f"irf_f32({src}[{i}])") if half else (lambda i: f"{src}[{i}]")
        axes = tuple(op.attributes["axes"])
        kept = [i for i in range(t.rank) if i not in axes]
        out_shape = [t.shape[i] for i in kept]
        groups = {}
        for flat, pos in enumerate(np.ndindex(*t.shape)):
            key = tuple(pos[i] for i in kept)
            groups.setdefault(key, []).append(flat)
        res = self.name(op.result)
        to = (lambda x: f"{HALF_TYPES[C_TYPES[et.name]][1]}({x})") if half else (lambda x: x)
        if op.init:  # folded into the accumulator one element after another (a chain of fused multiply-adds)
            acc = op.init[0]
            outs = list(groups.values())
            if out_shape:
                self.line(f"{self.ctype(et)} {res}[{len(outs)}];")
            for o_flat, members in enumerate(outs):
                e = self.elem(acc, str(o_flat))
                for m in members:  # halves round after every step, as the simulator does
                    e = to(comb.format(a=f"irf_f32({e})" if half else e, b=get(m)))
                out = f"{res}[{o_flat}]" if out_shape else f"const {self.ctype(et)} {res}"
                self.line(f"{out} = {e};")
            return
        if not out_shape and t.numel > TREE_REDUCE_MAX:  # a long tile to one value: an unrolled loop over it
            self.line(f"{acc_t} {res}_acc = {get(0)};")
            self.unrolled(t.numel, f"{res}_acc = {comb.format(a=f'{res}_acc', b=get('irf_e'))};", start=1)
            self.line(f"const {self.ctype(et)} {res} = {to(f'{res}_acc')};")
            return
        if not out_shape:
            self.line(f"const {self.ctype(et)} {res} = {to(_tree(comb, [get(i) for i in range(t.numel)]))};")
            return
        self.line(f"{self.ctype(et)} {res}[{int(np.prod(out_shape))}];")
        for o_flat, (_, members) in enumerate(groups.items()):
            self.line(f"{res}[{o_flat}] = {to(_tree(comb, [get(m) for m in members]))};")


# A register tile of at most this many elements reduces as a balanced tree of its monoid's op: log2(n) dependent
# steps where a chain takes n - 1 (a decode step's row max and sum over a lane's scores: 4 steps, not 15).
TREE_REDUCE_MAX = 64


def _tree(comb: str, items: list[str]) -> str:
    """`comb` (a format with `a` and `b`) over `items` as a balanced tree: halves combined pairwise."""
    if len(items) == 1:
        return items[0]
    mid = len(items) // 2
    return comb.format(a=_tree(comb, items[:mid]), b=_tree(comb, items[mid:]))
