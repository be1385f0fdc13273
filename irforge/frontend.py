"""What `irforge compile` takes: a Python snippet, a Python file, or an `nn.Module` with example inputs.

Each becomes a `TorchProgram` to capture: a module to export, example inputs and their names, and the eager outputs
(computed once, the reference that `--check` compares against).

**Snippets** (`-c`): Python whose last expression is the computation, with `torch`, `nn` and `F` in scope.

    x=torch.randn(16,64); bias=torch.randn(64); w=torch.randn(64,16); torch.relu(torch.matmul(x + bias, w))
    nn.RMSNorm(2048)(torch.randn(1,32,2048))
    (lambda q, k: q @ k.mT)(torch.randn(4,8), torch.randn(4,8))

Tensors the snippet creates are the graph's inputs, named after their variables (`x`, `bias`, `w`), after the
lambda's parameters they are passed to (`q`, `k`), or `x`, `y`, `z`, `x3`, ... when created inline. Modules the
snippet creates are part of the program: their parameters and buffers become params (`@norm.weight`, or
`@rms_norm.weight` for an inline `nn.RMSNorm(...)`).

The random number generator is seeded (0) before a snippet or a file runs, so one command always gives the same
inputs and weights.

**Files**: a Python file that defines `model` (an `nn.Module`, or a function of tensors) and `example_inputs` (a
tensor or a tuple of tensors). Inputs are named after the parameters of `model.forward` (or of the function).
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import runpy
import tokenize
import traceback
from dataclasses import dataclass, field

import torch
from torch import nn

from .diagnostics import IRForgeError, decode_source, error, register_source
from .location import UNKNOWN, FileLineColLoc, Location

SNIPPET = "<snippet>"

# Calls that create a tensor from nothing: in a snippet, each makes a graph input.
_FACTORIES = frozenset(
    {"randn", "rand", "randint", "zeros", "ones", "full", "empty", "tensor", "as_tensor", "arange", "eye",
     "linspace", "randperm", "normal"}
)  # fmt: skip
# Methods that only convert a freshly created tensor (still an input) or module (still part of the program):
# `torch.randn(4).half()`, `nn.RMSNorm(64).half()`, `nn.Dropout(0.1).eval()`.
_CONVERSIONS = frozenset({"to", "half", "float", "bfloat16", "double", "int", "long", "bool", "contiguous", "eval"})


@dataclass
class TorchProgram:
    """A program ready to capture: `model(*inputs)` is the computation."""

    model: nn.Module
    inputs: tuple
    input_names: list[str]
    outputs: list = field(default_factory=list)  # eager results on `inputs`
    where: Location = UNKNOWN  # the user's expression, for messages about the program as a whole
    buffers_after: dict = field(default_factory=dict)  # the module's buffers after the eager run (updated state)


def _eager(model, inputs, where: Location, source: str | None) -> tuple[list, dict]:
    """Run the program once in eager mode; user errors become located messages. Returns the outputs and the
    module's buffers as the run left them; the buffers themselves are put back, so that capture sees the state
    the run started from."""
    buffers = dict(model.named_buffers())
    before = {n: b.clone() for n, b in buffers.items()}
    try:
        with torch.no_grad():
            out = model(*inputs)
    except IRForgeError:
        raise
    except (Exception, SystemExit) as e:
        raise _user_exception(e, source, where) from None
    finally:
        after = {n: b.clone() for n, b in buffers.items()}
        with torch.no_grad():
            for n, b in buffers.items():
                b.copy_(before[n])
    outs = _flatten(out)
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        got = ", ".join(sorted({type(o).__name__ for o in outs if not isinstance(o, torch.Tensor)})) or "nothing"
        raise error(f"the program must return a tensor (or tuples of tensors), but it returns {got}", where)
    return outs, after


def _flatten(out) -> list:
    """Outputs in the order torch.export flattens them (nested tuples and lists, left to right)."""
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in _flatten(o)]
    return [out]


def _user_exception(e: BaseException, source: str | None, where: Location) -> IRForgeError:
    """An exception the user's code raised, located at the deepest frame of the user's own source."""
    loc = where
    for fs in traceback.extract_tb(e.__traceback__):
        if source is not None and fs.filename == source:
            loc = FileLineColLoc(fs.filename, fs.lineno, (fs.colno or 0) + 1)
    if isinstance(e, SystemExit):
        return error(f"the program exits (sys.exit({e.code!r})) instead of computing its result", loc)
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return error(f"the program raised {type(e).__name__}" + (f": {first}" if first else ""), loc)


# ---- nn.Module and functions -----------------------------------------------------------------------------------
class _FunctionModule(nn.Module):
    """A plain function of tensors, as a module torch.export can take."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _arg_names(fn, n: int) -> list[str]:
    try:
        params = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    names = params[:n]
    return names + [f"arg{i}" for i in range(len(names), n)]


def from_module(model, inputs, where: Location = UNKNOWN, source: str | None = None) -> TorchProgram:
    """An `nn.Module` (or a function of tensors) and its example inputs."""
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    bad = [i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)]
    if bad:
        raise error(f"example input #{bad[0]} is a {type(inputs[bad[0]]).__name__}, not a tensor", where)
    if isinstance(model, nn.Module):
        names = _arg_names(model.forward, len(inputs))
    elif callable(model):
        names = _arg_names(model, len(inputs))
        model = _FunctionModule(model)
    else:
        raise error(f"cannot compile a {type(model).__name__}: expected an nn.Module or a function of tensors", where)
    outputs, buffers = _eager(model, inputs, where, source)
    return TorchProgram(model, inputs, names, outputs, where, buffers)


def from_file(path: str) -> TorchProgram:
    """A Python file defining `model` and `example_inputs`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise error(f"cannot read '{path}': {e.strerror}") from None
    where = FileLineColLoc(path, 1, 1)
    try:  # as Python reads it: UTF-8 unless a coding comment says otherwise (PEP 263)
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as e:
        raise error(f"the file does not parse: {e.msg}", where) from None
    decode_source(data, path, encoding)
    torch.manual_seed(0)
    try:
        ns = runpy.run_path(path, run_name="__irforge__")
    except SyntaxError as e:
        raise error(f"the file does not parse: {e.msg}", FileLineColLoc(path, e.lineno or 1, e.offset or 1)) from None
    except (Exception, SystemExit) as e:
        raise _user_exception(e, path, where) from None
    missing = [n for n in ("model", "example_inputs") if n not in ns]
    if missing:
        raise error(
            f"'{path}' must define {' and '.join(missing)}: `model` (an nn.Module or a function of tensors) and "
            "`example_inputs` (a tensor or a tuple of tensors)",
            where,
        )
    return from_module(ns["model"], ns["example_inputs"], where, path)


# ---- snippets ------------------------------------------------------------------------------------------------------
def from_snippet(text: str, name: str = SNIPPET) -> TorchProgram:
    """A snippet whose last expression is the computation (see the module docstring)."""
    register_source(name, text)
    try:
        tree = ast.parse(text, name, "exec")
    except SyntaxError as e:
        loc = FileLineColLoc(name, e.lineno or 1, e.offset or 1)
        raise error(f"the snippet does not parse: {e.msg}", loc) from None
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1] if tree.body else None
        loc = FileLineColLoc(name, last.lineno, last.col_offset + 1) if last else FileLineColLoc(name, 1, 1)
        raise error("the snippet must end with an expression: the computation to compile", loc)
    expr = tree.body[-1].value
    where = FileLineColLoc(name, expr.lineno, expr.col_offset + 1)
    ns: dict = {"torch": torch, "nn": nn, "F": torch.nn.functional, "__name__": "__irforge_snippet__"}
    torch.manual_seed(0)
    try:
        exec(compile(ast.Module(body=tree.body[:-1], type_ignores=[]), name, "exec"), ns)
        hoisted = _Hoister(ns, name).run(expr)
    except IRForgeError:
        raise
    except (Exception, SystemExit) as e:
        raise _user_exception(e, name, where) from None
    inputs, modules = _free_inputs(hoisted.expr, ns, hoisted)
    model = _SnippetModule(hoisted.expr, name, ns, [n for n, _ in inputs], modules)
    if not inputs:
        raise error("the snippet computes nothing from tensors: create its inputs, e.g. torch.randn(4, 8)", where)
    tensors = tuple(t for _, t in inputs)
    outputs, buffers = _eager(model, tensors, where, name)
    return TorchProgram(model, tensors, [n for n, _ in inputs], outputs, where, buffers)


@dataclass
class _Hoisted:
    expr: ast.expr
    tensors: dict[str, torch.Tensor]  # inline-created inputs, by the name given to them
    modules: dict[str, nn.Module]  # inline-created modules


class _Hoister(ast.NodeTransformer):
    """Evaluates the tensors and modules a snippet's last expression creates, replacing them with names."""

    def __init__(self, ns: dict, filename: str):
        self.ns = ns
        self.filename = filename
        self.tensors: dict[str, torch.Tensor] = {}
        self.modules: dict[str, nn.Module] = {}
        self.lambda_params: set[str] = set()

    def run(self, expr: ast.expr) -> _Hoisted:
        new = self.visit(expr)
        return _Hoisted(new, self.tensors, self.modules)

    def _closed(self, node: ast.AST) -> bool:
        """No lambda parameter and no tensor variable inside: the value does not depend on the inputs."""
        for n in ast.walk(node):
            if isinstance(n, (ast.Lambda, ast.NamedExpr)):
                return False
            if isinstance(n, ast.Name) and (n.id in self.lambda_params or isinstance(self.ns.get(n.id), torch.Tensor)):
                return False
        return True

    def _static(self, node: ast.expr):
        """The value of a dotted name (`torch.randn`, `nn.Linear`), or None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.ns:
            return None
        value = self.ns[node.id]
        for p in reversed(parts):
            value = getattr(value, p, None)
        return value

    def _creates(self, node: ast.Call) -> str | None:
        fn = self._static(node.func)
        if fn is None:
            if isinstance(node.func, ast.Attribute) and node.func.attr in _CONVERSIONS:
                inner = node.func.value
                if isinstance(inner, ast.Call):
                    return self._creates(inner)
            return None
        if isinstance(fn, type) and issubclass(fn, nn.Module):
            return "module"
        if getattr(fn, "__name__", None) in _FACTORIES and getattr(torch, fn.__name__, None) is fn:
            return "tensor"
        return None

    def visit_Call(self, node: ast.Call):
        kind = self._creates(node) if self._closed(node) else None
        if kind is None:
            if isinstance(node.func, ast.Lambda):
                params = [a.arg for a in node.func.args.args]
                self.lambda_params |= set(params)
                node.func = self.visit(node.func)
                node.args = [
                    self._visit_arg(a, params[i] if i < len(params) else None) for i, a in enumerate(node.args)
                ]
                node.keywords = [self.visit(k) for k in node.keywords]
                return node
            return self.generic_visit(node)
        return self._hoist(node, kind, None)

    def _visit_arg(self, a: ast.expr, hint: str | None):
        if isinstance(a, ast.Call) and self._closed(a) and self._creates(a) == "tensor":
            return self._hoist(a, "tensor", hint)
        return self.visit(a)

    def _hoist(self, node: ast.Call, kind: str, hint: str | None):
        value = eval(compile(ast.Expression(node), self.filename, "eval"), self.ns)
        if kind == "tensor":
            if not isinstance(value, torch.Tensor):
                return node
            name = self._fresh(hint or "x", tensor=True, hinted=hint is not None)
            self.tensors[name] = value
        else:
            if not isinstance(value, nn.Module):
                return node
            name = self._fresh(hint or _snake(type(value).__name__), tensor=False)
            self.modules[name] = value
        return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)

    def _fresh(self, base: str, tensor: bool, hinted: bool = False) -> str:
        taken = set(self.ns) | set(self.tensors) | set(self.modules) | (set() if hinted else self.lambda_params)
        if tensor and base == "x":
            for cand in ("x", "y", "z"):
                if cand not in taken:
                    return cand
            base = "x"
        k, name = 0, base
        while name in taken:
            k += 1
            name = f"{base}{k}"
        return name


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _free_inputs(expr: ast.expr, ns: dict, hoisted: _Hoisted):
    """Input tensors and modules the expression uses, in order of first use."""
    inputs: dict[str, torch.Tensor] = {}
    modules: dict[str, nn.Module] = dict(hoisted.modules)
    for n in sorted((n for n in ast.walk(expr) if isinstance(n, ast.Name)), key=lambda n: (n.lineno, n.col_offset)):
        if n.id in hoisted.tensors:
            inputs.setdefault(n.id, hoisted.tensors[n.id])
        elif isinstance(ns.get(n.id), torch.Tensor):
            inputs.setdefault(n.id, ns[n.id])
        elif isinstance(ns.get(n.id), nn.Module):
            modules.setdefault(n.id, ns[n.id])
    return list(inputs.items()), modules


class _SnippetModule(nn.Module):
    """The snippet's last expression as `forward(*inputs)`, its modules registered (their weights become params)."""

    def __init__(self, expr: ast.expr, filename: str, ns: dict, input_names: list[str], modules: dict):
        super().__init__()
        for n, m in modules.items():
            self.add_module(n, m)
        self._module_names = list(modules)
        names = input_names + self._module_names
        # `def forward(<inputs>, <modules>): return <expr>`, positions kept so traced ops point into the snippet
        fn = ast.FunctionDef(
            name="forward",
            args=ast.arguments(
                posonlyargs=[], args=[ast.arg(n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]
            ),
            body=[ast.copy_location(ast.Return(expr), expr)],
            decorator_list=[],
        )
        mod = ast.fix_missing_locations(ast.Module(body=[ast.copy_location(fn, expr)], type_ignores=[]))
        scope = dict(ns)
        exec(compile(mod, filename, "exec"), scope)
        self._fn = scope["forward"]

    def forward(self, *inputs):
        return self._fn(*inputs, *(getattr(self, n) for n in self._module_names))
