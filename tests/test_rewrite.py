"""The greedy pattern driver: rewrites to a fixed point, re-visits what a rewrite touched, folds dead pure ops,
orders patterns by benefit, and refuses to loop forever (naming the pattern that kept firing)."""

from __future__ import annotations

import pytest

from irforge.diagnostics import IRForgeError
from irforge.ir import Operation
from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.rewrite import RewritePattern, Rewriter, apply_patterns


def parse(text):
    return parse_module(text, allow_unregistered=True)


class MergeIncrements(RewritePattern):
    """inc{n=a}(inc{n=b}(x)) -> inc{n=a+b}(x): only reaches a fixed point if users are re-visited."""

    op_name = "x.inc"

    def match_and_rewrite(self, op, rw):
        src = op.operands[0]
        if not isinstance(src.owner, Operation) or src.owner.name != "x.inc":
            return False
        inner = src.owner
        n = inner.attributes["n"] + op.attributes["n"]
        merged = Operation([inner.operands[0]], [op.results[0].type], {"n": n}, name="x.inc")
        rw.replace_op(op, merged)
        return True


INCREMENTS = """\
%x = "x.src"() : () -> i32
%a = "x.inc"(%x) {n = 1} : (i32) -> i32
%b = "x.inc"(%a) {n = 2} : (i32) -> i32
%c = "x.inc"(%b) {n = 3} : (i32) -> i32
"x.sink"(%c) : (i32) -> ()
"""


def test_chain_reaches_a_fixed_point():
    m = parse(INCREMENTS)
    assert apply_patterns(m, [MergeIncrements()]) is True
    # The intermediate x.inc ops are not pure, so they stay, unused; the sink reads one merged increment.
    sink = m.body.ops[-1]
    assert sink.operands[0].owner.attributes["n"] == 6
    assert sink.operands[0].owner.operands[0].owner.name == "x.src"
    assert apply_patterns(m, [MergeIncrements()]) is False  # nothing left to do


def test_dead_pure_ops_are_folded():
    m = parse('%x = "x.src"() : () -> f32\n%d = test.pure %x : f32\n%e = test.pure %d : f32\n')
    assert apply_patterns(m, []) is True
    assert [o.name for o in m.body.ops] == ["x.src"]
    m = parse('%x = "x.src"() : () -> f32\n%d = test.pure %x : f32\n')
    assert apply_patterns(m, [], fold_dead=False) is False


class Toggle(RewritePattern):
    """Always fires; `requeue` says whether it tells the driver (which then re-visits the op at once)."""

    op_name = "x.flip"

    def __init__(self, requeue):
        self.requeue = requeue

    def match_and_rewrite(self, op, rw):
        op.attributes["on"] = not op.attributes.get("on", False)
        if self.requeue:
            rw.modified(op)
        else:
            rw.changed = True
        return True


def test_non_convergence_is_an_error_naming_the_pattern():
    m = parse('"x.flip"() : () -> ()\n')
    with pytest.raises(IRForgeError, match=r"did not converge after 3 sweeps \(last to fire: Toggle\)"):
        apply_patterns(m, [Toggle(requeue=False)], max_iterations=3)
    with pytest.raises(IRForgeError, match=r"did not converge in sweep 1 \(last to fire: Toggle\)"):
        apply_patterns(m, [Toggle(requeue=True)], max_iterations=3)


def test_patterns_are_tried_by_benefit_and_name():
    order = []

    class Probe(RewritePattern):
        def __init__(self, tag, benefit, op_name):
            self.tag, self.benefit, self.op_name = tag, benefit, op_name

        def match_and_rewrite(self, op, rw):
            order.append((self.tag, op.name))
            return False

    m = parse('"x.a"() : () -> ()\n"x.b"() : () -> ()\n')
    apply_patterns(m, [Probe("low", 1, "x.a"), Probe("any", 5, None), Probe("high", 9, "x.a")])
    # per op: the patterns naming it by benefit, then the generic ones
    assert order == [("high", "x.a"), ("low", "x.a"), ("any", "x.a"), ("any", "x.b")]


def test_replace_op_with_new_ops_keeps_the_name():
    m = parse('%x = "x.src"() : () -> f32\n%y = "x.old"(%x) : (f32) -> f32\n"x.sink"(%y) : (f32) -> ()\n')
    old = m.body.ops[1]
    new = Operation([old.operands[0]], [old.results[0].type], name="x.new")
    rw = Rewriter()
    rw.replace_op(old, new)
    assert rw.changed
    assert (
        print_module(m) == '%x = "x.src"() : () -> f32\n%y = "x.new"(%x) : (f32) -> f32\n"x.sink"(%y) : (f32) -> ()\n'
    )


def test_replace_op_checks_the_result_count():
    m = parse('%x = "x.src"() : () -> f32\n%y = "x.old"(%x) : (f32) -> f32\n')
    with pytest.raises(ValueError, match="1 result\\(s\\) but 0 replacement"):
        Rewriter().replace_op(m.body.ops[1], [])


def test_ops_erased_by_a_pattern_are_not_visited():
    seen = []

    class EraseNext(RewritePattern):
        op_name = "x.first"

        def match_and_rewrite(self, op, rw):
            nxt = op.parent.ops[op.parent.ops.index(op) + 1]
            if nxt.name != "x.second":
                return False
            rw.erase_op(nxt)
            return True

    class Record(RewritePattern):
        def match_and_rewrite(self, op, rw):
            seen.append(op.name)
            return False

    m = parse('"x.first"() : () -> ()\n"x.second"() : () -> ()\n"x.last"() : () -> ()\n')
    apply_patterns(m, [EraseNext(), Record()])
    assert "x.second" not in seen and [o.name for o in m.body.ops] == ["x.first", "x.last"]
