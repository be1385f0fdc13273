"""Structural equality and hashing: blind to value names and locations, sensitive to everything else, and the
same digest in every process (it keys the tuning database)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from irforge.hashing import structural_hash, structurally_equal
from irforge.parser import parse_module

BASE = """\
func.func @f(%a: f32, %b: f32) -> f32 {
  %c = test.constant 1 : f32
  %x = test.pure %a, %b {k = [1, 2.0, true, "s"]} : f32
  test.loop %i in 0..4 {
    test.effect %i, %x
  }
  "x.op"(%a) ({
  ^bb0(%y: f32[2]):
    "x.in"(%y) : (f32[2]) -> ()
  }) : (f32) -> ()
  func.return %x
}
"""


def parse(text):
    return parse_module(text, "h.ir", allow_unregistered=True)


def test_names_and_locations_do_not_matter():
    renamed = BASE.replace("%x", "%other").replace("%i", "%j").replace("%y", "%0")
    moved = "\n\n" + BASE.replace("  %c", '  %c = test.constant 1 : f32 loc("elsewhere":9:9)\n  %unused_c', 1)
    a = parse(BASE)
    for text in (BASE, renamed):
        b = parse(text)
        assert structurally_equal(a, b) and structural_hash(a) == structural_hash(b)
    # moved has an extra op: different
    assert not structurally_equal(a, parse(moved))
    located = parse(BASE.replace("func.return %x", 'func.return %x loc("x.py":1:1)'))
    assert structural_hash(located) == structural_hash(a)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("test.constant 1 : f32", "test.constant 2 : f32"),  # attribute value
        ("test.constant 1 : f32", "test.constant 1.0 : f32"),  # int vs float
        ("[1, 2.0, true", "[1, 2.0, 1"),  # bool vs int
        ("2.0, true", "-0.0, true"),  # not even -0.0 == 0.0 hides
        ("%a, %b {k", "%b, %a {k"),  # operand order
        ("%i, %x", "%x, %i"),
        ("0..4", "0..5"),
        ('%y: f32[2]):\n    "x.in"(%y) : (f32[2])', '%y: f32[3]):\n    "x.in"(%y) : (f32[3])'),  # block arg type
        ('"x.in"', '"x.out"'),  # op name
        (") -> f32 {\n", ") -> f32 attributes {e} {\n"),  # an extra unit attribute
        ("  ^bb0(%y: f32[2]):\n", '  ^bb0(%y: f32[2]):\n    "x.more"() : () -> ()\n'),  # an extra op
    ],
)
def test_any_other_change_is_seen(old, new):
    assert old in BASE
    a, b = parse(BASE), parse(BASE.replace(old, new, 1))
    assert not structurally_equal(a, b)
    assert structural_hash(a) != structural_hash(b)


def test_region_shape_is_seen():
    empty = parse('"x.r"() ({\n}) : () -> ()\n')
    one_block = parse('"x.r"() ({\n^bb0:\n}) : () -> ()\n')
    two_blocks = parse('"x.r"() ({\n^bb0:\n^bb1:\n}) : () -> ()\n')
    two_regions = parse('"x.r"() ({\n}, {\n}) : () -> ()\n')
    hashes = {structural_hash(m) for m in (empty, one_block, two_blocks, two_regions)}
    assert len(hashes) == 4


def test_digest_is_the_same_in_every_process():
    code = "import sys; from irforge.hashing import structural_hash; from irforge.parser import parse_module; "
    code += "print(structural_hash(parse_module(sys.stdin.read(), allow_unregistered=True)))"
    digests = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", code], input=BASE, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        digests.add(proc.stdout.strip())
    assert digests == {structural_hash(parse(BASE))}
    assert len(digests.pop()) == 64
