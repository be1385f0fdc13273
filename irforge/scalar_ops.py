"""The one table of scalar operations, shared by every level from tensor down to CUDA.

The tensor dialect's elementwise ops, the loop dialect's scalar SSA math and the CUDA emitter all name operations
from this table, so adding an op here makes it available everywhere: its arity, how its result type follows from
its operands, its numpy semantics (the reference interpreters), and its CUDA spelling (an infix operator, or a
function `irf_<name>` that the emitter's prelude defines for every dtype).

Half types (f16, bf16) compute in f32 and round on the way out, as PyTorch does; `quantize` does that rounding
for numpy arrays (bf16 values are held in float32 arrays).

`cast` converts to the type its op states (its result type does not follow from the operand): floats round to
nearest even, floats to integers truncate toward zero, anything to bool is `x != 0`, bool to numbers is 0 or 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .types import ScalarType, boolean


class _LazyNumpy:
    """numpy, imported when first used: the interpreters compute with it, and importing it would cost every
    `irforge-opt` run (which evaluates nothing) a fifth of its startup."""

    def __getattr__(self, name):
        import numpy

        globals()["np"] = numpy
        return getattr(numpy, name)


np = _LazyNumpy()


def _numpy(name: str):
    """numpy's function `name`, looked up when called (the tables below are built before numpy is imported)."""

    def call(*args, **kwargs):
        return getattr(np, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def _erf(x):
    # numpy has no erf; math.erf vectorised keeps the reference exact (interpreters are for small shapes).
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# The smallest normal float32: `exp_flush` results below it are zero (the SFU's ex2 flushes them).
_F32_TINY = 2.0**-126


def _exp_flush(x):
    r = np.exp(x)
    return np.where(r < _F32_TINY, np.zeros_like(r), r)


def _exp_sub_flush(a, b):
    return _exp_flush(a - b)


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _div(a, b):
    if a.dtype.kind in "iu":
        return np.trunc(np.true_divide(a, b)).astype(a.dtype)
    return np.true_divide(a, b)


def _not(a):
    return np.logical_not(a) if a.dtype == np.bool_ else np.invert(a)


def _cast(x):
    # The conversion itself happens in `quantize`, which every evaluation ends with.
    return x


def _round_half_even(x):
    return np.round(x)


@dataclass(frozen=True)
class ScalarOp:
    """One entry of the table. A plugin adds one through the entry-point group `irforge.scalar_ops` (a `ScalarOp`, or
    a module whose `scalar_ops` lists them; such a module should import nothing of irforge but this one):

        ScalarOp("softplus", 1, "math", lambda x: np.logaddexp(0, x), "irf_softplus", "log(1 + e ** a)",
                 cuda_source="IRF_DEV float irf_softplus(float a) { return log1pf(expf(a)); }")

    `cuda_source` defines the prelude function for each C type the op takes (float, double, __half,
    __nv_bfloat16, ...); the built-in ops' definitions are generated in `dialects/cuda/prelude.py`."""

    name: str
    arity: int
    kind: str  # "arith" | "math" | "compare" | "logic" | "select" | "cast"
    numpy: object  # vectorised implementation on numpy arrays
    cuda: str  # infix operator ("+") or the prelude function "irf_<name>"
    summary: str
    cuda_source: str = ""  # a plugin op's prelude definitions of its `irf_<name>` function

    @property
    def infix(self) -> bool:
        return not self.cuda.startswith("irf_")

    def result_type(self, operand_types: list[ScalarType]) -> ScalarType:
        if len(operand_types) != self.arity:
            raise ValueError(f"'{self.name}' takes {self.arity} operand(s), got {len(operand_types)}")
        if self.kind == "cast":
            raise ValueError("'cast' converts to the result type its op states; it cannot be inferred")
        if self.kind == "compare":
            return boolean
        if self.kind == "select":
            if operand_types[0] != boolean:
                raise ValueError(f"'select' needs a bool condition, got {operand_types[0]}")
            if operand_types[1] != operand_types[2]:
                raise ValueError(f"'select' branches differ: {operand_types[1]} vs {operand_types[2]}")
            return operand_types[1]
        if len(set(operand_types)) != 1:
            raise ValueError(f"'{self.name}' operands differ in type: {', '.join(map(str, operand_types))}")
        t = operand_types[0]
        if self.kind == "math" and not t.is_float:
            raise ValueError(f"'{self.name}' needs a floating-point operand, got {t}")
        if self.kind == "logic" and t != boolean and not t.is_int:
            raise ValueError(f"'{self.name}' needs bool or integer operands, got {t}")
        return t


def _op(name, arity, kind, fn, cuda=None, summary=""):
    return ScalarOp(name, arity, kind, fn, cuda or f"irf_{name}", summary)


SCALAR_OPS: dict[str, ScalarOp] = {
    o.name: o
    for o in [
        # arithmetic (any numeric type)
        _op("add", 2, "arith", _numpy("add"), "+", "a + b"),
        _op("sub", 2, "arith", _numpy("subtract"), "-", "a - b"),
        _op("mul", 2, "arith", _numpy("multiply"), "*", "a * b"),
        _op("div", 2, "arith", _div, "/", "a / b (true division for floats, truncating for integers)"),
        _op("floordiv", 2, "arith", _numpy("floor_divide"), None, "floor(a / b)"),
        _op("remainder", 2, "arith", _numpy("mod"), None, "a - floor(a / b) * b (Python's %)"),
        _op("fmod", 2, "arith", _numpy("fmod"), None, "a - trunc(a / b) * b, exactly (C's fmod: the sign of a)"),
        _op("maximum", 2, "arith", _numpy("maximum"), None, "max(a, b), NaN-propagating"),
        _op("minimum", 2, "arith", _numpy("minimum"), None, "min(a, b), NaN-propagating"),
        _op("neg", 1, "arith", _numpy("negative"), None, "-a"),
        _op("abs", 1, "arith", _numpy("abs"), None, "|a|"),
        _op("sign", 1, "arith", _numpy("sign"), None, "-1, 0 or 1"),
        # floating-point math
        _op("pow", 2, "math", _numpy("power"), None, "a ** b"),
        _op("exp", 1, "math", _numpy("exp"), None, "e ** a"),
        _op("exp_flush", 1, "math", _exp_flush, None, "e ** a, results below 2 ** -126 flushed to 0"),
        _op(
            "exp_sub_flush",
            2,
            "math",
            _exp_sub_flush,
            None,
            "e ** (a - b), results below 2 ** -126 flushed to 0; on the GPU a fused multiply-add and ex2 "
            "(|b| * 2 ** -24 of error in the exponent)",
        ),
        _op("exp2", 1, "math", _numpy("exp2"), None, "2 ** a"),
        _op("expm1", 1, "math", _numpy("expm1"), None, "e ** a - 1"),
        _op("log", 1, "math", _numpy("log"), None, "natural logarithm"),
        _op("log2", 1, "math", _numpy("log2"), None, "base-2 logarithm"),
        _op("log1p", 1, "math", _numpy("log1p"), None, "log(1 + a)"),
        _op("sqrt", 1, "math", _numpy("sqrt"), None, "square root"),
        _op("rsqrt", 1, "math", _rsqrt, None, "1 / sqrt(a)"),
        _op("reciprocal", 1, "math", _numpy("reciprocal"), None, "1 / a"),
        _op("sin", 1, "math", _numpy("sin"), None, "sine"),
        _op("cos", 1, "math", _numpy("cos"), None, "cosine"),
        _op("tan", 1, "math", _numpy("tan"), None, "tangent"),
        _op("tanh", 1, "math", _numpy("tanh"), None, "hyperbolic tangent"),
        _op("sigmoid", 1, "math", _sigmoid, None, "1 / (1 + e ** -a)"),
        _op("erf", 1, "math", _erf, None, "error function"),
        _op("floor", 1, "math", _numpy("floor"), None, "round down"),
        _op("ceil", 1, "math", _numpy("ceil"), None, "round up"),
        _op("round", 1, "math", _round_half_even, None, "round half to even"),
        _op("trunc", 1, "math", _numpy("trunc"), None, "round toward zero"),
        # comparisons (result bool)
        _op("eq", 2, "compare", _numpy("equal"), "==", "a == b"),
        _op("ne", 2, "compare", _numpy("not_equal"), "!=", "a != b"),
        _op("lt", 2, "compare", _numpy("less"), "<", "a < b"),
        _op("le", 2, "compare", _numpy("less_equal"), "<=", "a <= b"),
        _op("gt", 2, "compare", _numpy("greater"), ">", "a > b"),
        _op("ge", 2, "compare", _numpy("greater_equal"), ">=", "a >= b"),
        # logic (bool or integers)
        _op("and", 2, "logic", _numpy("bitwise_and"), "&", "a and b (bitwise on integers)"),
        _op("or", 2, "logic", _numpy("bitwise_or"), "|", "a or b (bitwise on integers)"),
        _op("xor", 2, "logic", _numpy("bitwise_xor"), "^", "a xor b (bitwise on integers)"),
        _op("not", 1, "logic", _not, None, "logical not (bitwise on integers)"),
        # choice
        _op("select", 3, "select", _numpy("where"), None, "c ? a : b"),
        # conversion (the result type comes from the op)
        _op("cast", 1, "cast", _cast, None, "convert to the result type"),
    ]
}


def _add_plugin_ops() -> None:
    from .diagnostics import error
    from .registry import plugin_objects, plugin_source

    for ep, obj in plugin_objects("irforge.scalar_ops"):
        for op in getattr(obj, "scalar_ops", (obj,)):
            if not isinstance(op, ScalarOp):
                raise error(f"{plugin_source(ep)} gives a {type(op).__name__}, not an irforge.scalar_ops.ScalarOp")
            if op.name in SCALAR_OPS:
                raise error(f"scalar op '{op.name}' of {plugin_source(ep)} is already in the table")
            SCALAR_OPS[op.name] = op


_add_plugin_ops()


@dataclass(frozen=True)
class CombineStep:
    """One step of a monoid's combine program: `result = op(args...)`; an arg is a name or a float constant."""

    result: str
    op: str
    args: tuple


@dataclass(frozen=True)
class Monoid:
    """A reduction's carrier algebra: an identity and an associative combine.

    A simple monoid carries one value and combines with the scalar op `op` (`add`, `maximum`, ...). A compound
    carrier carries several values: `online` is (running max m, sums s1..sk) standing for `s_i = sum(w_i * exp(x -
    m))` -- online softmax with k = 1, flash attention's (max, denominator, numerators) with k > 1. Its elements are
    carriers too: one term x weighted by w is `(x, w1, ..., wk)`. Its exponentials are `exp_flush`: exp(x - m) is at
    most 1 and the largest term's is 1, so a term below 2^-126 is under the rounding of every sum it joins (a sum
    of weights exp(x - m) >= 1), and the SFU's one-instruction ex2 may drop it.

    The combine is data, not code: `combine_program(width)` is a straight-line program over this table's scalar ops
    whose inputs are `a0..`, `b0..` (the two carriers) and whose `outputs` name the combined carrier, so the numpy
    interpreters and the CUDA emitter derive their combine from the one definition here. So is the fold of many
    elements at once (a register tile's lanes, an array axis): `fold_program(width)` is a program over inputs
    `a0..` (element components) whose `fold:<op>` steps reduce over the folded axes (their results broadcast back
    where later steps use them). `reduce` runs it on numpy; it must agree with folding `combine`, which the tests
    check.
    """

    name: str
    op: str  # the combining scalar op of a simple monoid; "" for compound carriers
    numpy_reduce: object  # numpy reduction of one array (simple monoids), e.g. np.sum
    width: int | None = 1  # carrier components; None: variadic (online: one max and at least one sum)
    summary: str = ""

    def identity(self, dtype: ScalarType, component: int = 0):
        """The identity of carrier component `component`, as a Python value of `dtype`."""
        return dtype.as_python(self._identity(dtype, component))

    def _identity(self, dtype: ScalarType, component: int):
        if self.name == "online":
            return float("-inf") if component == 0 else 0.0
        if self.name == "add":
            return 0
        if self.name == "mul":
            return 1
        if dtype.is_float:
            return float("-inf") if self.name == "max" else float("inf")
        if dtype == boolean:
            return self.name == "min"
        info = np.iinfo(numpy_dtype(dtype))
        return int(info.min) if self.name == "max" else int(info.max)

    def check_width(self, width: int) -> str | None:
        """Why a carrier of `width` components is not one of this monoid (None if it is)."""
        if self.width is None:
            return None if width >= 2 else f"'{self.name}' carries a max and at least one sum, got {width} value(s)"
        return None if width == self.width else f"'{self.name}' carries {self.width} value(s), got {width}"

    def check_types(self, types: list[ScalarType]) -> str | None:
        """Why carrier components of these types cannot use this monoid (None if they can)."""
        if self.name == "online":
            bad = [t for t in types if not t.is_float]
            return f"'online' needs floating-point components, got {bad[0]}" if bad else None
        t = types[0]
        if self.name in ("add", "mul") and t == boolean:
            return f"'{self.name}' needs a numeric carrier, got bool"
        return None

    def combine_program(self, width: int) -> tuple[tuple[CombineStep, ...], tuple[str, ...]]:
        """The combine of carriers `a` and `b` (inputs `a0..a{width-1}`, `b0..`): (steps, output names)."""
        if self.name != "online":
            return (CombineStep("r0", self.op, ("a0", "b0")),), ("r0",)
        # m = max(a0, b0); each side's sums are rescaled by exp(its max - m), and a side whose max is -inf (no terms
        # yet) contributes nothing (its exp(-inf - -inf) would be NaN).
        steps = [CombineStep("m", "maximum", ("a0", "b0"))]
        for side in "ab":
            steps += [
                CombineStep(f"d{side}", "sub", (f"{side}0", "m")),
                CombineStep(f"e{side}", "exp_flush", (f"d{side}",)),
                CombineStep(f"n{side}", "eq", (f"{side}0", float("-inf"))),
                CombineStep(f"s{side}", "select", (f"n{side}", 0.0, f"e{side}")),
            ]
        outputs = ["m"]
        for i in range(1, width):
            steps += [
                CombineStep(f"ta{i}", "mul", (f"a{i}", "sa")),
                CombineStep(f"tb{i}", "mul", (f"b{i}", "sb")),
                CombineStep(f"r{i}", "add", (f"ta{i}", f"tb{i}")),
            ]
            outputs.append(f"r{i}")
        return tuple(steps), tuple(outputs)

    def fold_program(self, width: int) -> tuple[tuple[CombineStep, ...], tuple[str, ...]]:
        """The fold of many element carriers at once (inputs `a0..`; `fold:<scalar op>` reduces over the folded
        axes with that op): (steps, output names)."""
        if self.name != "online":
            return (CombineStep("r0", f"fold:{self.op}", ("a0",)),), ("r0",)
        # m = max(x); s_i = sum(w_i * exp(x - m)); when every x is -inf, m is -inf and the sums are 0 (not the NaN of
        # exp(-inf - -inf)).
        steps = [
            CombineStep("m", "fold:maximum", ("a0",)),
            CombineStep("d", "sub", ("a0", "m")),
            CombineStep("e", "exp_flush", ("d",)),
            CombineStep("z", "eq", ("m", float("-inf"))),
        ]
        outputs = ["m"]
        for i in range(1, width):
            steps += [
                CombineStep(f"p{i}", "mul", (f"a{i}", "e")),
                CombineStep(f"s{i}", "fold:add", (f"p{i}",)),
                CombineStep(f"r{i}", "select", ("z", 0.0, f"s{i}")),
            ]
            outputs.append(f"r{i}")
        return tuple(steps), tuple(outputs)

    def keyed_program(
        self, width: int, fused: bool = False
    ) -> tuple[str, tuple[CombineStep, ...], tuple[str, ...]] | None:
        """For a carrier whose sums are measured from a key, its first component (online: s_i = sum(w_i * exp(x -
        m)), m being any bound of the terms' x, the max keeping the exponentials in range), how a carrier or an
        element reads at a larger key: (the op that joins keys, steps, outputs), the steps over inputs `a0..` and
        `k` giving its sums at key k. None for monoids without a key.

        Folding elements into a carrier is then: k = the join of the carrier's key and every element's, the carrier's
        sums at k, plus each element's at k (in any order; a sum of products, so fused multiply-adds), the key
        kept as k. That is the combine of the carrier with the elements' fold, the key taken before the sums.

        `fused` takes each exponential exp(a0 - k) as one `exp_sub_flush` (a fused multiply-add and ex2 on the GPU,
        a subtraction fewer, with |k| * 2^-24 of error in the exponent): for terms rounded to 16 bits next, as
        flash attention's weights P are, that error is far under the rounding."""
        if self.name != "online":
            return None
        # exp(a0 - k) scales the sums; a side with no terms yet (a0 = -inf) contributes nothing: exp(-inf - k) is
        # 0, also where k is -inf, read as 0 (exp(-inf - -inf) would be NaN). The guard is on k, shared by every
        # element of a row, not on each a0.
        steps = [
            CombineStep("n", "eq", ("k", float("-inf"))),
            CombineStep("z", "select", ("n", 0.0, "k")),
        ]
        if fused:
            steps.append(CombineStep("s", "exp_sub_flush", ("a0", "z")))
        else:
            steps += [CombineStep("d", "sub", ("a0", "z")), CombineStep("s", "exp_flush", ("d",))]
        steps += [CombineStep(f"r{i}", "mul", (f"a{i}", "s")) for i in range(1, width)]
        return "maximum", tuple(steps), tuple(f"r{i}" for i in range(1, width))

    def key_slack(self) -> float | None:
        """How far a keyed carrier's key may stay below its terms' x (None for monoids without a key): online's
        exp(x - k) then stay at most 256, far inside float's range, and a fold whose terms stay within it keeps the
        key and leaves the sums unscaled (flash attention then rescales O only where a row's max leaps)."""
        return math.log(256.0) if self.name == "online" else None

    def component_inputs(self, width: int) -> tuple[frozenset[int], ...]:
        """Which carrier components each component of the combine reads (from either side), by the data flow of
        `combine_program`: the online max reads only the maxima, each sum the maxima and itself."""
        steps, outputs = self.combine_program(width)
        reads: dict[str, frozenset[int]] = {f"{side}{i}": frozenset({i}) for side in "ab" for i in range(width)}
        for st in steps:
            reads[st.result] = frozenset().union(*(reads[x] for x in st.args if isinstance(x, str)))
        return tuple(reads[o] for o in outputs)

    def folds_into_carrier(self) -> bool:
        """Whether folding elements and then combining with a carrier is folding them starting from the carrier
        (one fold step with the combine's own op), so an accumulator can take the elements one after another."""
        steps, _ = self.fold_program(1)
        return len(steps) == 1 and steps[0].op == f"fold:{self.op}"

    def combine(self, a: tuple, b: tuple, dtypes: list[ScalarType]) -> tuple:
        """Run `combine_program` on numpy arrays (carrier components of `dtypes`)."""
        steps, outputs = self.combine_program(len(dtypes))
        env = {f"{side}{i}": np.asarray(x) for side, xs in (("a", a), ("b", b)) for i, x in enumerate(xs)}
        for st in steps:
            args = [env[x] if isinstance(x, str) else x for x in st.args]  # constants stay weakly typed
            with np.errstate(all="ignore"):
                env[st.result] = SCALAR_OPS[st.op].numpy(*args)
        return tuple(quantize(env[o], t) for o, t in zip(outputs, dtypes))

    def reduce(self, components: tuple, axis: int, dtypes: list[ScalarType]) -> tuple:
        """Fold whole `axis` of each component (element carriers) from the identity, by `fold_program`; one result
        per component."""
        steps, outputs = self.fold_program(len(dtypes))
        env = {f"a{i}": np.asarray(x) for i, x in enumerate(components)}
        with np.errstate(all="ignore"):
            for st in steps:
                args = [env[x] if isinstance(x, str) else x for x in st.args]
                if st.op.startswith("fold:"):
                    env[st.result] = np.expand_dims(_fold(st.op.removeprefix("fold:"), args[0], axis), axis)
                else:
                    env[st.result] = SCALAR_OPS[st.op].numpy(*args)
        return tuple(quantize(np.squeeze(env[o], axis), t) for o, t in zip(outputs, dtypes))


def _fold(op: str, x: np.ndarray, axis: int) -> np.ndarray:
    """Reduce `axis` of `x` with scalar op `op` (add, mul, maximum, minimum); an empty max or min is its identity."""
    if op in ("add", "mul"):
        return (np.sum if op == "add" else np.prod)(x, axis=axis)
    if x.dtype.kind == "f":
        initial = -np.inf if op == "maximum" else np.inf
    elif x.dtype == np.bool_:
        initial = op == "minimum"
    else:
        info = np.iinfo(x.dtype)
        initial = info.min if op == "maximum" else info.max
    return (np.max if op == "maximum" else np.min)(x, axis=axis, initial=initial)


MONOIDS: dict[str, Monoid] = {
    m.name: m
    for m in [
        Monoid("add", "add", _numpy("sum"), summary="sum"),
        Monoid("mul", "mul", _numpy("prod"), summary="product"),
        Monoid("max", "maximum", _numpy("max"), summary="maximum, NaN-propagating"),
        Monoid("min", "minimum", _numpy("min"), summary="minimum, NaN-propagating"),
        Monoid("online", "", None, None, "running max and sums rescaled to it (online softmax, flash attention)"),
    ]
}


# ---- dtypes in numpy ---------------------------------------------------------------------------------------------
_NUMPY = {  # numpy's names of them
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "float32",  # held in float32, rounded to bf16 by `quantize`
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "bool": "bool_",
    "index": "int64",
}


def numpy_dtype(t: ScalarType):
    """The numpy dtype that stores values of `t` (bf16 lives in float32)."""
    return getattr(np, _NUMPY[t.name])


def compute_dtype(t: ScalarType):
    """The numpy dtype arithmetic on `t` happens in: half types compute in float32."""
    return np.float32 if t.name in ("f16", "bf16") else numpy_dtype(t)


def quantize(x: np.ndarray, t: ScalarType) -> np.ndarray:
    """Round `x` to the values `t` can hold, stored in `numpy_dtype(t)` (round-to-nearest-even for bf16)."""
    x = np.asarray(x)
    if t.name == "bf16":
        f = x.astype(np.float32, copy=False)
        bits = f.view(np.uint32)
        # In 32 bits: only a NaN's pattern can carry out of them, and NaNs are kept as they are below.
        rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
        return np.where(np.isnan(f), f, rounded.view(np.float32))
    if x.dtype.kind == "f" and t.is_int and t.bits < 64:
        # Floats into narrow integers: truncate toward zero into 64 bits, then wrap (C leaves an out-of-range
        # conversion undefined; the CUDA prelude converts the same way, so both levels agree).
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(np.int64).astype(numpy_dtype(t))
    return x.astype(numpy_dtype(t), copy=False)


def evaluate(name: str, args: list[np.ndarray], result: ScalarType) -> np.ndarray:
    """Apply scalar op `name` elementwise, computing half types in float32 and rounding to `result`."""
    op = SCALAR_OPS[name]
    args = [a.astype(np.float32) if a.dtype == np.float16 else a for a in map(np.asarray, args)]
    with np.errstate(all="ignore"):  # inf, nan and out-of-range conversions are values here, not errors
        return quantize(op.numpy(*args), result)
