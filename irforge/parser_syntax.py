"""The core grammar's callbacks (`CoreSyntax`), which dialects' syntax mixins extend."""

from __future__ import annotations

import json

from lark import Token, Transformer

from . import index_expr as ix
from .attributes import UNIT, DictAttr, SymbolRef
from .diagnostics import error
from .index_expr import AffineMap, IndexExpr
from .location import UNKNOWN, FileLineColLoc, Location, NameLoc, fuse
from .parser_tree import BlockAST, OpAST, RegionAST, ValueLeaf, ValueRef, _leaves
from .types import SCALAR_NAMES, FunctionType, OpaqueType, ScalarType, TensorType

_SCALARS = {name: ScalarType(name) for name in SCALAR_NAMES}


def _tok_loc(t: Token, file: str) -> FileLineColLoc:
    return FileLineColLoc(file, t.line, t.column)


# ---- the core syntax -------------------------------------------------------------------------------------------
class CoreSyntax(Transformer):
    """Callbacks for the core grammar's rules; dialect syntax mixins add theirs."""

    __visit_tokens__ = False
    file = "<input>"

    def ref(self, tok: Token) -> ValueRef:
        """A `ValueRef` for a VALUE_ID token: use this in dialect callbacks."""
        return ValueRef(tok[1:], FileLineColLoc(self.file, tok.line, tok.column))

    def loc_of(self, tok: Token) -> FileLineColLoc:
        return _tok_loc(tok, self.file)

    def string(self, tok: Token) -> str:
        """The value of a STRING token: use this in dialect callbacks."""
        if "\\" not in tok:  # nothing to unescape (the common case)
            return tok[1:-1]
        return _unquote(tok, self.loc_of(tok))

    # ops
    def op(self, c):
        explicit = c[-1] if isinstance(c[-1], Location) else None
        ast = c[-2] if explicit is not None else c[-1]
        if isinstance(c[0], list):
            ast.results = c[0]
        if explicit is not None:
            ast.loc = explicit
        elif ast.results:  # an op's position is where its line starts: its first result name
            ast.loc = ast.results[0].loc
        return ast

    def result_names(self, c):
        return [self.ref(t) for t in c]

    def generic_op(self, c):
        name_tok, uses, regions, attrs, (ins, outs) = c
        return OpAST(
            name=self.string(name_tok),
            operands=uses or [],
            attrs=dict(attrs) if attrs else {},
            result_types=outs,
            regions=regions or [],
            operand_types=ins,
            loc=self.loc_of(name_tok),
        )

    def generic_regions(self, c):
        return list(c)

    def value_uses(self, c):
        return list(c)

    def value_use(self, c):
        return self.ref(c[0])

    def region(self, c):
        entry = BlockAST(ops=[x for x in c if isinstance(x, OpAST)])
        blocks = [x for x in c if isinstance(x, BlockAST)]
        # `{}` is a region without blocks; the builder gives a `single_block` op its one empty block.
        return RegionAST([entry, *blocks] if entry.ops else blocks)

    def block(self, c):
        label, args, *ops = c
        return BlockAST(args=args or [], ops=ops, label=str(label)[1:])

    def block_args(self, c):
        return list(c)

    def block_arg(self, c):
        return (self.ref(c[0]), c[1])

    # types
    def scalar_type(self, c):
        return _SCALARS[c[0]]

    def tensor_type(self, c):
        return TensorType(_SCALARS[c[0]], tuple(self.integer(d) for d in c[1:]))

    def dialect_type(self, c):
        from .registry import registry

        name = str(c[0])[1:]
        params = tuple(c[1]) if c[1] is not None else ()
        cls = registry().type_class(name)
        if cls is None:
            return OpaqueType(name, params)
        try:
            return cls.from_params(params)
        except (TypeError, ValueError) as e:
            raise error(f"invalid parameters for type !{name}: {e}", self.loc_of(c[0])) from None

    def type_params(self, c):
        return list(c)

    def types(self, c):
        return list(c)

    def function_type(self, c):
        return (c[0] or [], c[1])

    def single_type(self, c):
        return [c[0]]

    def type_tuple(self, c):
        return c[0] or []

    # attributes
    def int_attr(self, c):
        return self.integer(c[0])

    def neg_int_attr(self, c):
        return -self.integer(c[0])

    def integer(self, tok: Token) -> int:
        """The value of an INT token (Python refuses to convert more than 4300 digits: say where)."""
        try:
            return int(tok)
        except ValueError:
            raise error(f"integer literal too long ({len(tok)} digits)", self.loc_of(tok)) from None

    def float_attr(self, c):
        return float(c[0])

    def neg_float_attr(self, c):
        return -float(c[0])

    def inf_attr(self, c):
        return float("inf")

    def neg_inf_attr(self, c):
        return float("-inf")

    def nan_attr(self, c):
        return float("nan")

    def true_attr(self, c):
        return True

    def false_attr(self, c):
        return False

    def unit_attr(self, c):
        return UNIT

    def none_attr(self, c):
        return None

    def string_attr(self, c):
        return self.string(c[0])

    def list_attr(self, c):
        return tuple(c)

    def type_attr(self, c):
        return c[0]

    def function_type_attr(self, c):
        return FunctionType(tuple(c[0][0]), tuple(c[0][1]))

    def symbol_attr(self, c):
        return c[0]

    def bare_symbol(self, c):
        return SymbolRef(str(c[0])[1:])

    def quoted_symbol(self, c):
        return SymbolRef(self.string(c[0]))

    def dict_attr(self, c):
        seen = set()
        for (k, tok), _ in c:
            if k in seen:
                raise error(f"duplicate key {k!r} in dictionary", self.loc_of(tok))
            seen.add(k)
        return DictAttr((k, v) for (k, _), v in c)

    def dict_pair(self, c):
        return (c[0], c[1])

    def dict_unit(self, c):
        return (c[0], UNIT)

    def bare_key(self, c):
        return (str(c[0]), c[0])

    def string_key(self, c):
        return (self.string(c[0]), c[0])

    # index expressions
    def affine_map(self, c):
        kw = c[0]
        c = c[1:]
        loc = self.loc_of(kw)
        dims = [str(d) for d in c if isinstance(d, Token)]
        exprs = [e for e in c if isinstance(e, IndexExpr)]
        for i, d in enumerate(dims):
            if d != f"d{i}":
                raise error(f"affine_map dimensions must be d0, d1, ... in order; found {d} in position {i}", loc)
        for e in exprs:
            for leaf in _leaves(e):
                if isinstance(leaf, ValueLeaf):
                    raise error("SSA values cannot appear in an affine_map; use d0, d1, ...", leaf.ref.loc)
        try:
            return AffineMap(len(dims), tuple(exprs))
        except ValueError as e:
            raise error(str(e), loc) from None

    def iconst(self, c):
        return ix.Const(self.integer(c[0]))

    def ineg(self, c):
        return ix.Const(-self.integer(c[0]))

    def idim(self, c):
        return ix.Dim(int(str(c[0])[1:]))

    def ivalue(self, c):
        return ValueLeaf(self.ref(c[0]))

    def iadd(self, c):
        return ix.Add(c[0], c[1])

    def isub(self, c):
        return ix.Sub(c[0], c[1])

    def imul(self, c):
        return ix.Mul(c[0], c[1])

    def ifloordiv(self, c):
        return ix.FloorDiv(c[0], c[1])

    def iceildiv(self, c):
        return ix.CeilDiv(c[0], c[1])

    def imod(self, c):
        return ix.Mod(c[0], c[1])

    def imin(self, c):
        return ix.Min(c[0], c[1])

    def imax(self, c):
        return ix.Max(c[0], c[1])

    # locations
    def loc(self, c):
        return c[0]

    def loc_unknown(self, c):
        return UNKNOWN

    def loc_file(self, c):
        return FileLineColLoc(self.string(c[0]), self.integer(c[1]), self.integer(c[2]))

    def loc_name(self, c):
        return NameLoc(self.string(c[0]), c[1] if c[1] is not None else UNKNOWN)

    def loc_fused(self, c):
        return fuse(c)


def _unquote(tok, loc: Location = UNKNOWN) -> str:
    try:
        return json.loads(str(tok), strict=False)  # strict=False: a raw tab inside quotes is fine
    except json.JSONDecodeError as e:
        if isinstance(loc, FileLineColLoc):
            loc = FileLineColLoc(loc.file, loc.line, loc.col + e.pos)
        raise error(f"invalid string literal: {e.msg}", loc) from None
