"""Pass remarks (`Pass.remark`: what a pass decided and why) and the pass manager calling each pass's `check`."""

from __future__ import annotations

import io

import pytest
from irforge.tools import cli

from irforge.diagnostics import IRForgeError
from irforge.instrumentation import Remarks
from irforge.parser import parse_module
from irforge.pass_manager import Pass, PassManager, ScheduledPass, option, run_pipeline

# t = (x + b) * x, then y = t / sum(t) per row: fusing t's kernel into the row kernel computes t twice per element
# (in the sum and in the division). Work in 4-byte words and scalar ops: k_add 128 * (2 loads, 2 ops, 1 store) =
# 640, k_red 8 * (16 loads + 16 * (load, div, store)) = 512; fused, t's store and loads go and its computation is
# made in both loops: 8 * (16 * 4 + 16 * (4 + div + store)) = 1280. 1280 / 1152 = 1.11x.
LOOP = """func.func @forward(%x: f32[8,16], %b: f32[16]) -> f32[8,16] {
  %t = loop.buffer f32[8,16]
  loop.kernel @k_add {
    loop.for %i in 0..8 {
      loop.for %j in 0..16 {
        %xv = loop.load %x[%i, %j]
        %bv = loop.load %b[%j]
        %s = scalar.add %xv, %bv : f32
        %m = scalar.mul %s, %xv : f32
        loop.store %t[%i, %j] = %m
      }
    }
  }
  %y = loop.buffer f32[8,16]
  loop.kernel @k_red {
    loop.for %i in 0..8 {
      %acc = loop.reduce %k in 0..16 add(0.0) -> f32 {
        %tv = loop.load %t[%i, %k]
        loop.yield %tv
      }
      loop.for %j in 0..16 {
        %u = loop.load %t[%i, %j]
        %d = scalar.div %u, %acc : f32
        loop.store %y[%i, %j] = %d
      }
    }
  }
  func.return %y
}
"""


def remarks_of(module, pipeline, only=None):
    rec = Remarks(only)
    run_pipeline(module, pipeline, instrumentations=[rec])
    return [(r.pass_name, r.message) for r in rec.records]


def test_fusion_remarks_say_what_was_fused_and_why_not():
    refused = remarks_of(parse_module(LOOP), "loop-fuse-broadcast{max-recompute=0.0}")
    assert refused == [
        (
            "loop-fuse-broadcast",
            "not fused @k_add into @k_red: the work would grow 1.11x (1152 -> 1280), past the limit of 1x "
            "(max-recompute=0)",
        )
    ]
    accepted = remarks_of(parse_module(LOOP), "loop-fuse-broadcast")
    assert accepted == [("loop-fuse-broadcast", "fused @k_add into @k_red: work 1152 -> 1280")]


def test_remarks_are_filtered_by_pass_and_said_once():
    m = parse_module(LOOP)
    assert remarks_of(m, "loop-fuse-elementwise,loop-fuse-broadcast{max-recompute=0.0}", only=["cse"]) == []
    rec = Remarks()
    run_pipeline(
        parse_module(LOOP), "loop-fuse-broadcast{max-recompute=0.0},loop-fuse-broadcast", instrumentations=[rec]
    )
    assert [r.pass_name for r in rec.records] == ["loop-fuse-broadcast", "loop-fuse-broadcast"]
    assert str(rec.records[0]).startswith("<input>:15:3: remark: [loop-fuse-broadcast] not fused @k_add into @k_red")


class _Refusing(Pass):
    """Refuses any `limit` under 2 in its check; its run does not look."""

    name = "test-refusing"
    limit: int = option(1)
    ran = False

    def check(self, op):
        return f"limit={self.limit} is too small" if self.limit < 2 else None

    def run(self, op):
        type(self).ran = True
        self.remark(op, "ran")
        self.remark(op, "ran")  # said once


def test_the_pass_manager_calls_check_before_run():
    m = parse_module("func.func @f() {\n  func.return\n}\n", "f.ir")
    with pytest.raises(IRForgeError) as e:
        PassManager([ScheduledPass(_Refusing(), ())]).run(m)
    assert "limit=1 is too small" in str(e.value) and not _Refusing.ran
    rec = Remarks()
    PassManager([ScheduledPass(_Refusing(limit=2), ())], [rec]).run(m)
    assert _Refusing.ran and [r.message for r in rec.records] == ["ran"]
    _Refusing(limit=2).remark(m, "outside a pass manager: heard by no one")  # no error, nothing recorded


def test_check_may_point_at_the_op_at_fault():
    class AtFault(Pass):
        name = "test-at-fault"

        def check(self, op):
            return op.body.ops[0], "is the culprit"

        def run(self, op):
            raise AssertionError("run after a refusing check")

    m = parse_module('func.func @f() {\n  "test.effect"() : () -> ()\n  func.return\n}\n', "g.ir")
    with pytest.raises(IRForgeError) as e:
        PassManager([ScheduledPass(AtFault(), ("func.func",))]).run(m)
    assert e.value.render().startswith("g.ir:2:3: error: 'test.effect' op is the culprit")


def test_compile_verbose_prints_remarks():
    out, err = io.StringIO(), io.StringIO()
    argv = ["compile", "-c", "nn.RMSNorm(2048)(torch.randn(1,32,2048))", "--ir", "tile", "-v"]
    assert cli.main(argv, stdout=out, stderr=err) == 0
    text = err.getvalue()
    assert "pass tile-stage-inputs" in text
    assert "remark: [tile-cooperative-reduce] the reduction over 2048 elements is shared by" in text
    assert "remark: [tile-stage-inputs] x staged: box [1, 1, 2048] (8 KB)" in text
