"""The IR graph: SSA values, operations, blocks and regions.

An `Operation` has operands (values), results (values it defines), attributes (immutable values keyed by name),
regions (each a list of blocks holding operations) and a location. Values keep their uses, so replacing a value or
erasing an op is cheap and checked. Types, attributes and locations are immutable; the graph itself is mutable and
edited through `Block` and `Operation` methods (or a `rewrite.Rewriter`, which also notifies its driver).

An op kind is declared as a subclass, xDSL style:

    class ReduceOp(Operation):
        '''Reduce a tensor over axes with a monoid.'''
        name = "tensor.reduce"
        operand_names = ("input",)
        result_names = ("result",)
        attribute_types = {"kind": str, "axes": tuple}
        traits = frozenset({"pure"})

which gives `op.input`, `op.result`, `op.kind` accessors and the generic verifier's arity and attribute checks.
A leading `*` marks a variadic operand or result group (`("*inputs",)`). `verify_` adds op-specific checks;
`print_custom` gives the op its custom syntax (the dialect's `.lark` grammar parses it back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from .attributes import to_attr
from .diagnostics import IRForgeError
from .location import UNKNOWN, Location
from .types import Type

if TYPE_CHECKING:
    pass


class Value:
    """An SSA value: a block argument or an op result."""

    __slots__ = ("name_hint", "type", "uses")

    def __init__(self, type: Type, name_hint: str | None = None):
        self.type = type
        self.name_hint = name_hint
        self.uses: list[tuple[Operation, int]] = []

    @property
    def users(self) -> list[Operation]:
        seen: dict[int, Operation] = {}
        for op, _ in self.uses:
            seen.setdefault(id(op), op)
        return list(seen.values())

    @property
    def owner(self) -> Operation | Block:
        raise NotImplementedError

    def replace_all_uses_with(self, new: Value) -> None:
        if new is self:
            return
        for op, i in list(self.uses):
            op.set_operand(i, new)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} %{self.name_hint or '?'}: {self.type}>"


class OpResult(Value):
    __slots__ = ("index", "op")

    def __init__(self, type: Type, op: Operation, index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.op = op
        self.index = index

    @property
    def owner(self) -> Operation:
        return self.op


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: Type, block: Block, index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    @property
    def owner(self) -> Block:
        return self.block


_RESERVED = {
    "name", "operands", "results", "result", "attributes", "regions", "loc", "parent",
    "body", "erase", "walk", "clone", "verify", "traits", "type", "dialect",
}  # fmt: skip


class Operation:
    """One operation. Subclass it to declare an op kind (see the module docstring)."""

    name: ClassVar[str] = ""
    operand_names: ClassVar[tuple[str, ...] | None] = None  # None: any operands
    result_names: ClassVar[tuple[str, ...] | None] = None
    attribute_types: ClassVar[dict[str, object]] = {}  # required attributes: name -> type, tuple of types, or None
    optional_attributes: ClassVar[dict[str, object]] = {}
    num_regions: ClassVar[int | None] = None  # None: any
    traits: ClassVar[frozenset[str]] = frozenset()
    # Names of nesting anchors this op answers to in pipelines, e.g. "kernel" for `kernel(tile-blockify)`.
    anchor_aliases: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        for group, getter in (("operand_names", "operands"), ("result_names", "results")):
            names = cls.__dict__.get(group)
            if names is not None:
                _add_group_accessors(cls, names, getter)
        for attr in {**cls.__dict__.get("attribute_types", {}), **cls.__dict__.get("optional_attributes", {})}:
            if attr in _RESERVED:
                raise TypeError(f"{cls.__name__}: attribute name {attr!r} clashes with an Operation member")
            if attr not in cls.__dict__:
                setattr(cls, attr, property(lambda self, a=attr: self.attributes.get(a)))

    def __init__(
        self,
        operands=(),
        result_types=(),
        attributes=None,
        regions=(),
        loc: Location = UNKNOWN,
        *,
        name: str | None = None,
        result_hints=None,
    ):
        if name is not None:
            self.name = name
        elif not type(self).name:
            raise TypeError("a generic Operation needs a name")
        self._operands: list[Value] = []
        self.results = tuple(
            OpResult(t, self, i, result_hints[i] if result_hints else None) for i, t in enumerate(result_types)
        )
        self.attributes: dict[str, object] = {k: to_attr(v) for k, v in (attributes or {}).items()}
        self.regions: list[Region] = []
        self.loc = loc
        self.parent: Block | None = None
        for v in operands:
            self._append_operand(v)
        for r in regions:
            self.add_region(r)

    # ---- operands -----------------------------------------------------------------------------------------------
    @property
    def operands(self) -> tuple[Value, ...]:
        return tuple(self._operands)

    def _append_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"{self.name}: operand must be a Value, got {v!r}")
        v.uses.append((self, len(self._operands)))
        self._operands.append(v)

    def set_operand(self, i: int, v: Value) -> None:
        old = self._operands[i]
        old.uses.remove((self, i))
        v.uses.append((self, i))
        self._operands[i] = v

    def set_operands(self, values) -> None:
        self.drop_operands()
        for v in values:
            self._append_operand(v)

    def drop_operands(self) -> None:
        for i, v in enumerate(self._operands):
            v.uses.remove((self, i))
        self._operands = []

    # ---- results, regions, nesting ------------------------------------------------------------------------------
    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    def add_region(self, region: Region | None = None) -> Region:
        region = region if region is not None else Region()
        if region.parent is not None:
            raise ValueError("region already belongs to an op")
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def body(self) -> Block:
        """The single block of the single region (for ops that have one)."""
        return self.regions[0].block

    @property
    def parent_op(self) -> Operation | None:
        blk = self.parent
        return blk.parent.parent if blk is not None and blk.parent is not None else None

    def ancestors(self):
        """The ops enclosing this one, innermost first."""
        cur = self.parent_op
        while cur is not None:
            yield cur
            cur = cur.parent_op

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    def has_trait(self, trait: str) -> bool:
        return trait in self.traits

    def walk(self, post_order: bool = False):
        """Yield this op and every op nested in it; safe against edits of ops already yielded (pre-order)."""
        if not post_order:
            yield self
        for region in self.regions:
            for block in region.blocks:
                for op in list(block.ops):
                    yield from op.walk(post_order)
        if post_order:
            yield self

    def is_ancestor_of(self, other: Operation) -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent_op
        return False

    def erase(self) -> None:
        """Remove from the parent block and drop all uses; the results must be unused."""
        for r in self.results:
            if r.uses:
                users = ", ".join(sorted({u.name for u in r.users}))
                raise ValueError(f"cannot erase {self.name}: result still used by {users}")
        for op in self.walk(post_order=True):
            op.drop_operands()
        self.detach()

    def detach(self) -> Operation:
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None
        return self

    def clone(self, value_map: dict[Value, Value] | None = None) -> Operation:
        """Deep copy; operands found in `value_map` are remapped, and the map learns the new results."""
        vm = value_map if value_map is not None else {}
        new = object.__new__(type(self))
        new.name = self.name
        new._operands = []
        new.attributes = dict(self.attributes)
        new.regions = []
        new.loc = self.loc
        new.parent = None
        for v in self._operands:
            new._append_operand(vm.get(v, v))
        new.results = tuple(OpResult(r.type, new, r.index, r.name_hint) for r in self.results)
        for old, nr in zip(self.results, new.results):
            vm[old] = nr
        for region in self.regions:
            new.add_region(region.clone(vm))
        for k, v in self.__dict__.items():  # subclass state that is not IR structure
            if k not in new.__dict__:
                new.__dict__[k] = v
        return new

    # ---- verification and errors --------------------------------------------------------------------------------
    def verify_(self) -> None:
        """Op-specific checks; raise `self.error(...)`. Runs after the generic arity/attribute checks."""

    def error(self, message: str, notes=()) -> IRForgeError:
        from .diagnostics import error

        return error(f"'{self.name}' op {message}", self.loc, notes)

    # ---- syntax -------------------------------------------------------------------------------------------------
    print_custom: ClassVar[object] = None  # def print_custom(self, p: Printer) -> None, for a custom syntax

    @classmethod
    def infer_result_types(cls, operand_types, attributes) -> list[Type] | None:
        """Result types from operands and attributes, for custom syntaxes that do not spell them out."""
        return None

    def __repr__(self) -> str:
        from .printer import Printer

        return Printer(indent_width=2).op_to_string(self)


def _add_group_accessors(cls, names: tuple[str, ...], getter: str) -> None:
    variadic = [i for i, n in enumerate(names) if n.startswith("*")]
    if len(variadic) > 1:
        raise TypeError(f"{cls.__name__}: at most one variadic group in {getter}")
    v = variadic[0] if variadic else None
    n = len(names)
    for i, raw in enumerate(names):
        nm = raw.lstrip("*")
        if nm == "result" and getter == "results" and n == 1 and v is None:
            continue  # `op.result` already means the single result
        if nm in _RESERVED:
            raise TypeError(f"{cls.__name__}: {getter} name {nm!r} clashes with an Operation member")
        if nm in cls.__dict__:
            continue
        if v is None or i < v:
            fn = lambda self, i=i: getattr(self, getter)[i]
        elif i == v:
            fn = lambda self, i=i, tail=n - 1 - i: tuple(getattr(self, getter)[i : len(getattr(self, getter)) - tail])
        else:
            fn = lambda self, back=n - i: getattr(self, getter)[-back]
        setattr(cls, nm, property(fn))


class Block:
    __slots__ = ("args", "label_hint", "ops", "parent")

    def __init__(self, arg_types=(), arg_hints=None, label_hint: str | None = None):
        self.args: list[BlockArgument] = []
        self.ops: list[Operation] = []
        self.parent: Region | None = None
        self.label_hint = label_hint
        for i, t in enumerate(arg_types):
            self.add_arg(t, arg_hints[i] if arg_hints else None)

    def add_arg(self, type: Type, name_hint: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), name_hint)
        self.args.append(arg)
        return arg

    def _adopt(self, op: Operation) -> Operation:
        if op.parent is not None:
            raise ValueError(f"{op.name} is already in a block; detach it first")
        op.parent = self
        return op

    def append(self, op: Operation) -> Operation:
        self.ops.append(self._adopt(op))
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        self.ops.insert(index, self._adopt(op))
        return op

    def insert_before(self, anchor: Operation, *ops: Operation) -> None:
        i = self.ops.index(anchor)
        for k, op in enumerate(ops):
            self.insert(i + k, op)

    def insert_after(self, anchor: Operation, *ops: Operation) -> None:
        i = self.ops.index(anchor) + 1
        for k, op in enumerate(ops):
            self.insert(i + k, op)

    @property
    def parent_op(self) -> Operation | None:
        return self.parent.parent if self.parent is not None else None

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops and self.ops[-1].has_trait("terminator") else None

    def __iter__(self):
        return iter(list(self.ops))

    def __len__(self) -> int:
        return len(self.ops)


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks=()):
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block | None = None) -> Block:
        block = block if block is not None else Block()
        if block.parent is not None:
            raise ValueError("block already belongs to a region")
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The only block; a region with none gets an empty one."""
        if not self.blocks:
            self.add_block()
        if len(self.blocks) != 1:
            raise ValueError(f"region has {len(self.blocks)} blocks, not one")
        return self.blocks[0]

    def clone(self, value_map: dict[Value, Value]) -> Region:
        new = Region()
        for b in self.blocks:
            nb = new.add_block(Block(label_hint=b.label_hint))
            for a in b.args:
                value_map[a] = nb.add_arg(a.type, a.name_hint)
        for b, nb in zip(self.blocks, new.blocks):
            for op in b.ops:
                nb.append(op.clone(value_map))
        return new


def single_block_region(ops=(), arg_types=(), arg_hints=None) -> Region:
    block = Block(arg_types, arg_hints)
    for op in ops:
        block.append(op)
    return Region([block])
