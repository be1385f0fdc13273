"""`irforge new-plugin NAME`: a plugin distribution with one pass, its lit test and its numeric test, passing as
written, to make one's own (docs/writing-a-pass.md explains every piece).

    irforge new-plugin fold-negations && cd irforge-fold-negations
    pip install -e '.[dev]' && python -m pytest        # the numeric tests and the lit suite
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*\Z")

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "The irforge pass {name}"
dependencies = ["irforge"]

[project.optional-dependencies]
dev = ["pytest>=8", "hypothesis>=6.100", "lit>=17", "filecheck>=1.0"]

[project.entry-points."irforge.passes"]
{name} = "{module}:{cls}"

[tool.setuptools]
py-modules = ["{module}"]
"""

MODULE = '''\
"""The irforge pass `{name}`, a plugin (registered by the `irforge.passes` entry point in pyproject.toml).

Installed, it runs by name wherever irforge takes a pipeline:

    irforge-opt model.tensor.ir --pass-pipeline={name} -debug-only={name}
    irforge compile model.py --ir loop --after torch-to-tensor={name} -v
"""

from irforge import Pass
from irforge.dialects.tensor import ElementwiseOp
from irforge.rewrite import RewritePattern, Rewriter, apply_patterns


class FoldDoubleNegation(RewritePattern):
    """neg(neg(x)) -> x: the outer negation's uses take x; the inner one, unused, is erased."""

    op_name = "tensor.elementwise"

    def __init__(self, remark):
        self.remark = remark

    def match_and_rewrite(self, op, rw: Rewriter) -> bool:
        if op.attributes["op"] != "neg":
            return False
        inner = op.inputs[0].owner
        if not isinstance(inner, ElementwiseOp) or inner.attributes["op"] != "neg":
            return False
        self.remark(op, "neg(neg(x)) folded to x")
        rw.replace_op(op, [inner.inputs[0]])
        return True


class {cls}(Pass):
    """Fold double negations at the tensor level: neg(neg(x)) is x."""

    name = "{name}"
    input_level = "tensor"

    def run(self, op):
        apply_patterns(op, [FoldDoubleNegation(self.remark)])
'''

NUMERIC_TEST = '''\
"""The pass folds what it should, and never changes a program's answer (the tensor level's reference interpreter
before and after it, on random inputs, over random programs)."""

from hypothesis import given, settings

from irforge import parse_module, print_module
from irforge.testing import check_pipeline
from irforge.testing.strategies import tensor_programs

IR = """\\
func.func @forward(%x: f32[4]) -> f32[4] {{
  %a = tensor.elementwise neg %x : f32[4]
  %b = tensor.elementwise neg %a : f32[4]
  %c = tensor.elementwise exp %b : f32[4]
  func.return %c
}}
"""


def test_a_double_negation_folds():
    after = check_pipeline(parse_module(IR), "{name}", seeds=(0, 1))
    assert "neg" not in print_module(after)


@settings(max_examples=50, deadline=None)
@given(tensor_programs())
def test_the_answer_never_changes(module):
    check_pipeline(module, "{name}")
'''

LIT_TEST = '''\
"""Run the lit suite in tests/lit (FileCheck tests of the pass) as one test."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_lit_suite():
    lit = shutil.which("lit", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    assert lit, "the 'lit' command is missing: pip install -e '.[dev]'"
    proc = subprocess.run([lit, "-v", str(Path(__file__).parent / "lit")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
'''

LIT_CFG = """\
# lit configuration: irforge's own setup (irforge-opt, irforge and filecheck from this environment).
import irforge.testing

irforge.testing.lit_config(config, name="{dist}")
"""

LIT_IR = """\
// RUN: irforge-opt %s --pass-pipeline={name} | filecheck %s
// RUN: irforge-opt %s --pass-pipeline={name} -debug-only={name} -o /dev/null 2>&1 | filecheck %s --check-prefix=REMARK

// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %c = tensor.elementwise exp %x : f32[4]
// CHECK-NEXT:    func.return %c
// REMARK: {name}.ir:[[# @LINE + 3]]:3: remark: [{name}] neg(neg(x)) folded to x
func.func @forward(%x: f32[4]) -> f32[4] {{
  %a = tensor.elementwise neg %x : f32[4]
  %b = tensor.elementwise neg %a : f32[4]
  %c = tensor.elementwise exp %b : f32[4]
  func.return %c
}}
"""


def files(name: str) -> dict[str, str]:
    """The plugin's files, by path inside its folder."""
    module = "irforge_" + name.replace("-", "_")
    fields = {
        "name": name,
        "dist": f"irforge-{name}",
        "module": module,
        "cls": "".join(w.title() for w in name.split("-")),
    }
    return {
        "pyproject.toml": PYPROJECT.format(**fields),
        f"{module}.py": MODULE.format(**fields),
        f"tests/test_{module}.py": NUMERIC_TEST.format(**fields),
        "tests/test_lit.py": LIT_TEST,
        "tests/lit/lit.cfg.py": LIT_CFG.format(**fields),
        f"tests/lit/{name}.ir": LIT_IR.format(**fields),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the pass's name, as pipelines spell it (lowercase words joined by dashes)")
    p.add_argument("-o", dest="parent", default=".", metavar="DIR", help="where to make the folder (default: here)")


def run(args, out, err) -> int:
    from irforge.diagnostics import error
    from irforge.registry import registry

    name = args.name
    if not _NAME.match(name):
        raise error(f"'{name}' is not a pass name: lowercase words of letters and digits joined by dashes")
    if name in registry().pass_names() or name in registry().pipelines():
        raise error(f"'{name}' is already a pass or pipeline ({registry().sources.get(('pass', name), 'irforge')})")
    root = Path(args.parent) / f"irforge-{name}"
    if root.exists():
        raise error(f"{root} already exists")
    for path, text in files(name).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    out.write(f"wrote {root}: pip install -e '{root}[dev]' && (cd {root} && python -m pytest)\n")
    return 0
