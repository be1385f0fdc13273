"""The registry: built-ins load lazily, plugins come from entry points, and a name registered twice is an error
naming both sources. (tests/test_plugins.py installs real distributions; these tests fake the entry points.)"""

from __future__ import annotations

import subprocess
import sys
import types
from importlib import metadata

import pytest

from irforge import registry as registry_module
from irforge.diagnostics import IRForgeError
from irforge.dialect import Dialect
from irforge.ir import Operation
from irforge.pass_manager import Pass
from irforge.registry import registry, reset_registry


def test_loading_is_lazy():
    code = """
import sys
from irforge.registry import registry
r = registry()
loaded = lambda prefix: sorted(m for m in sys.modules if m.startswith(prefix))
assert loaded("irforge.passes.") == [] and loaded("irforge.dialects.") == [], sys.modules
r.dialects()
assert loaded("irforge.dialects.tile") and not loaded("irforge.passes."), loaded("irforge.passes.")
r.passes()
assert "irforge.passes.generic.cse" in sys.modules
assert "torch" not in sys.modules
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "ok\n", proc.stderr


@pytest.fixture
def fake_plugins(monkeypatch):
    """Install entry points {group: [(name, object)]} as if distributions declared them."""
    modules = []

    def install(entries):
        fakes = {}
        for group, items in entries.items():
            eps = []
            for name, obj in items:
                module = types.ModuleType(f"fake_plugin_{len(modules)}")
                module.obj = obj
                sys.modules[module.__name__] = module
                modules.append(module.__name__)
                eps.append(metadata.EntryPoint(name=name, value=f"{module.__name__}:obj", group=group))
            fakes[group] = eps
        monkeypatch.setattr(registry_module.metadata, "entry_points", lambda group: fakes.get(group, []), raising=True)
        reset_registry()

    yield install
    for name in modules:
        sys.modules.pop(name, None)
    monkeypatch.undo()
    reset_registry()


def make_pass(pass_name):
    return type("PluginPass", (Pass,), {"__doc__": "A plugin pass.", "name": pass_name, "run": lambda self, op: None})


def test_plugin_pass_is_registered(fake_plugins):
    fake_plugins({"irforge.passes": [("mine", make_pass("my-pass"))]})
    assert registry().passes()["my-pass"].summary() == "A plugin pass."
    assert registry().sources[("pass", "my-pass")] == "plugin 'mine' (fake_plugin_0:obj) from an unknown distribution"


def test_duplicate_pass_names_both_sources(fake_plugins):
    fake_plugins({"irforge.passes": [("dup", make_pass("cse"))]})
    with pytest.raises(IRForgeError) as info:
        registry().passes()
    assert str(info.value) == (
        "pass 'cse' is registered twice: by irforge.passes.generic.cse "
        "and by plugin 'dup' (fake_plugin_0:obj) from an unknown distribution"
    )


def test_duplicate_between_two_plugins(fake_plugins):
    fake_plugins({"irforge.passes": [("a", make_pass("same")), ("b", make_pass("same"))]})
    with pytest.raises(IRForgeError, match=r"pass 'same' is registered twice: by plugin 'a' .* and by plugin 'b'"):
        registry().passes()


class PluginOp(Operation):
    name = "mine.op"


def test_plugin_dialect_and_duplicate_dialect(fake_plugins):
    mine = Dialect(name="mine", summary="a plugin dialect", ops=(PluginOp,))
    fake_plugins({"irforge.dialects": [("mine", mine)]})
    assert registry().op_class("mine.op") is PluginOp
    fake_plugins({"irforge.dialects": [("shadow", Dialect(name="tile", summary="clash"))]})
    with pytest.raises(
        IRForgeError, match=r"dialect 'tile' is registered twice: by irforge.dialects.tile and by plugin"
    ):
        registry().dialects()


def test_plugin_module_with_a_dialect_attribute(fake_plugins):
    module = types.SimpleNamespace(dialect=Dialect(name="viamodule", summary="s"))
    fake_plugins({"irforge.dialects": [("m", module)]})
    assert "viamodule" in registry().dialects()


def test_broken_plugin_is_named(fake_plugins, monkeypatch):
    broken = metadata.EntryPoint(name="broken", value="no_such_module_xyz:thing", group="irforge.passes")
    monkeypatch.setattr(
        registry_module.metadata, "entry_points", lambda group: [broken] if group == "irforge.passes" else []
    )
    reset_registry()
    with pytest.raises(IRForgeError) as info:
        registry().passes()
    assert str(info.value).startswith(
        "cannot load plugin 'broken' (no_such_module_xyz:thing) from group irforge.passes: No module named"
    )


def test_duplicate_op_names_across_dialects(fake_plugins):
    fake_plugins({"irforge.dialects": [("x", Dialect(name="mine", summary="", ops=(PluginOp,)))]})
    registry().dialects()["mine2"] = Dialect(name="mine", summary="again", ops=(PluginOp,))
    with pytest.raises(
        IRForgeError, match=r"operation 'mine.op' is registered twice: by dialect mine and by dialect mine"
    ):
        registry().op_class("mine.op")


def test_a_pipeline_may_not_take_a_pass_name(fake_plugins, tmp_path):
    (tmp_path / "cse.pipeline").write_text("# shadows the cse pass\ndce\n")
    fake_plugins({"irforge.pipelines": [("shadow", tmp_path)]})
    with pytest.raises(IRForgeError) as info:
        registry().pipelines()
    assert str(info.value) == (
        f"pipeline 'cse' ({tmp_path / 'cse.pipeline'}) has the name of a pass (from irforge.passes.generic.cse)"
    )


def test_the_pass_index_follows_the_sources(tmp_path):
    """The index of built-in passes is kept under a digest of their sources: any edit, new or renamed file makes a
    new one."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text("name = 'a'\n")
    digests = [registry_module._sources_digest([tmp_path])]
    (tmp_path / "sub" / "a.py").write_text("name = 'b'\n")
    digests.append(registry_module._sources_digest([tmp_path]))
    (tmp_path / "b.py").write_text("")
    digests.append(registry_module._sources_digest([tmp_path]))
    (tmp_path / "b.py").rename(tmp_path / "c.py")
    digests.append(registry_module._sources_digest([tmp_path]))
    (tmp_path / "notes.txt").write_text("not a source")
    assert registry_module._sources_digest([tmp_path]) == digests[-1]
    assert len(set(digests)) == len(digests)


def test_a_pass_is_imported_when_looked_up(fake_plugins):
    fake_plugins({"irforge.passes": [("mine", make_pass("my-pass"))]})
    names = registry().pass_names()
    assert "cse" in names and "my-pass" in names and "no-such-pass" not in names
    assert registry().pass_class("cse").name == "cse"
    assert registry().pass_class("my-pass").summary() == "A plugin pass."
    assert registry().pass_class("no-such-pass") is None
