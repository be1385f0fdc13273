"""The registry of dialects, passes and named pipelines, built-in and from plugins.

Built-ins are found by walking the `irforge.dialects` and `irforge.passes` packages (passes through an index of the
walk, kept in the cache folder: see "passes" below); plugins register through the entry-point groups
`irforge.dialects` (a `Dialect`, or a module defining `dialect`), `irforge.passes` (a `Pass` subclass, or a module
whose `Pass` subclasses are all registered) and `irforge.pipelines` (a module or package whose folder holds
`.pipeline` files, or a path); scalar ops come through `irforge.scalar_ops` (`scalar_ops.py`). Everything is loaded
on first use, a built-in pass when its name is first looked up; a name registered twice, or a pipeline named like a
pass, is an error naming both sources.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pkgutil
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from .cache import atomic_write, cache_root
from .diagnostics import IRForgeError, error


@dataclass(frozen=True)
class NamedPipeline:
    name: str
    text: str
    source: str  # file the text came from, for diagnostics


class Registry:
    def __init__(self):
        self._dialects = None
        self._ops = None
        self._families = None
        self._types = None
        self._passes = None
        self._pipelines = None
        self.sources: dict[tuple[str, str], str] = {}  # (kind, name) -> where it was registered

    # ---- dialects -----------------------------------------------------------------------------------------------
    def dialects(self) -> dict:
        if self._dialects is None:
            from . import builtin
            from .pass_manager import frozen_heap

            found: dict = {}
            self._add(found, "dialect", builtin.dialect, "irforge.builtin")
            self._add(found, "dialect", builtin.func_dialect, "irforge.builtin")
            import irforge.dialects as pkg

            with frozen_heap():  # see passes()
                for mod in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
                    m = importlib.import_module(mod.name)
                    if hasattr(m, "dialect"):
                        self._add(found, "dialect", m.dialect, mod.name)
            for ep, obj in plugin_objects("irforge.dialects"):
                d = getattr(obj, "dialect", obj)
                self._add(found, "dialect", d, plugin_source(ep))
            self._dialects = found
        return self._dialects

    def op_class(self, name: str):
        """The class of op `name`: declared by a dialect, or the op family whose prefix it starts with."""
        if self._ops is None:
            ops, families = {}, {}
            for d in self.dialects().values():
                for op in d.ops:
                    self._add(ops, "operation", op, f"dialect {d.name}", key=op.name)
                for fam in d.op_families:
                    self._add(families, "operation family", fam, f"dialect {d.name}", key=fam.name)
            self._ops = ops
            self._families = sorted(families.items(), key=lambda kv: -len(kv[0]))
        cls = self._ops.get(name)
        if cls is None:
            cls = next((fam for prefix, fam in self._families if name.startswith(prefix) and name != prefix), None)
        return cls

    def type_class(self, name: str):
        if self._types is None:
            types = {}
            for d in self.dialects().values():
                for t in d.types:
                    self._add(types, "type", t, f"dialect {d.name}", key=t.name)
            self._types = types
        return self._types.get(name)

    def dialect_of(self, op_name: str):
        return self.dialects().get(op_name.split(".", 1)[0])

    # ---- passes -------------------------------------------------------------------------------------------------
    # A pipeline names a few of some 120 passes, and importing them all (with the dialects they use) costs each
    # `irforge-opt` run more than parsing its input. So a built-in pass is known by name and module from an index
    # (`_builtin_pass_modules`), and its module is imported when the name is first looked up. Plugins' passes are
    # always loaded: a plugin reusing a built-in name is an error whatever the pipeline runs.
    def pass_class(self, name: str):
        """The class of pass `name` (None if there is none), importing only the module that defines it."""
        cls = self._pass_table().get(name)
        if isinstance(cls, str):
            self._import_passes(cls)
            cls = self._passes[name]
        return cls

    def pass_names(self):
        """Every pass's name, sorted (passes added later last), without importing the built-in passes."""
        return self._pass_table().keys()

    def passes(self) -> dict:
        """{name: pass class} of every pass, importing all of them (listings, docs)."""
        for module in {m for m in self._pass_table().values() if isinstance(m, str)}:
            self._import_passes(module)
        return self._passes

    def add_pass(self, cls) -> None:
        """Register a pass class defined in Python (a notebook, a test): it then runs by name like any other."""
        self._add(self._pass_table(), "pass", cls, f"{cls.__module__}.{cls.__qualname__}", key=cls.name)

    def _pass_table(self) -> dict:
        """{name: pass class, or the module defining it while that is not imported}, sorted by name."""
        if self._passes is None:
            from .pass_manager import Pass

            found: dict = {}
            for name, module in self._builtin_pass_modules().items():
                self._add(found, "pass", module, module, key=name)
            for ep, obj in plugin_objects("irforge.passes"):
                for p in [obj] if isinstance(obj, type) else _passes_in(obj, Pass):
                    self._add(found, "pass", p, plugin_source(ep), key=p.name)
            self._passes = dict(sorted(found.items()))
        return self._passes

    def _import_passes(self, module: str) -> None:
        from .pass_manager import Pass, frozen_heap

        # Importing passes (and the dialects they use) builds hundreds of classes, which triggers full collections;
        # after torch is imported each rescans its heap (0.2 s of a first compile).
        with frozen_heap():
            m = importlib.import_module(module)
        for p in _passes_in(m, Pass):
            self._passes[p.name] = p

    def _builtin_pass_modules(self) -> dict[str, str]:
        """{pass name: module} of the built-in passes. Finding them means importing every module of `irforge.passes`,
        so the answer is kept in the cache folder under a digest of the package's sources: an edit makes a new
        entry. A name defined twice is an error naming both modules, as for any registration."""
        import irforge.passes as pkg

        path = cache_root() / "passes" / f"{_sources_digest(pkg.__path__)}.json"
        try:
            return json.loads(path.read_bytes())
        except (OSError, ValueError):  # not built yet (or unreadable): build it
            pass
        from .pass_manager import Pass, frozen_heap

        found: dict = {}
        with frozen_heap():  # see _import_passes
            for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
                for p in _passes_in(importlib.import_module(mod.name), Pass):
                    self._add(found, "pass", mod.name, mod.name, key=p.name)
        atomic_write(path, json.dumps(found, sort_keys=True).encode())
        return found

    # ---- named pipelines ----------------------------------------------------------------------------------------
    def pipelines(self) -> dict[str, NamedPipeline]:
        if self._pipelines is None:
            found: dict = {}
            for entry in resources.files("irforge.pipelines").iterdir():
                if entry.name.endswith(".pipeline"):
                    self._add_pipeline(found, entry.name, entry.read_text(encoding="utf-8"), str(entry))
            for _ep, obj in plugin_objects("irforge.pipelines"):
                path = Path(obj.__file__).parent if hasattr(obj, "__file__") else Path(obj)
                for f in sorted(path.glob("*.pipeline")) if path.is_dir() else [path]:
                    self._add_pipeline(found, f.name, f.read_text(encoding="utf-8"), str(f))
            passes = self._pass_table()
            for name, p in found.items():
                if name in passes:  # in a pipeline's text a name must mean one thing
                    where = self.sources[("pass", name)]
                    raise IRForgeError(f"pipeline '{name}' ({p.source}) has the name of a pass (from {where})")
            self._pipelines = found
        return self._pipelines

    def _add_pipeline(self, found, filename, text, source):
        name = filename.removesuffix(".pipeline")
        self._add(found, "pipeline", NamedPipeline(name, text, source), source, key=name)

    # ---- shared -------------------------------------------------------------------------------------------------
    def _add(self, table: dict, kind: str, obj, source: str, key: str | None = None) -> None:
        key = key if key is not None else obj.name
        if key in table:
            first = self.sources[(kind, key)]
            raise IRForgeError(f"{kind} '{key}' is registered twice: by {first} and by {source}")
        table[key] = obj
        self.sources[(kind, key)] = source


def _passes_in(module, base) -> list:
    return [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, base) and v.__module__ == module.__name__ and v.__dict__.get("name")
    ]


def _sources_digest(folders) -> str:
    """A digest of the Python sources under `folders` (their paths and contents)."""
    h = hashlib.sha256()
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(root, f)
                    with open(path, "rb") as src:
                        h.update(f"{os.path.relpath(path, folder)}\0".encode() + src.read() + b"\0")
    return h.hexdigest()


def plugin_objects(group: str):
    """(entry point, loaded object) for each entry point of `group`, by name; a plugin that fails to load is a
    located error naming it."""
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
        try:
            yield ep, ep.load()
        except Exception as e:  # a broken plugin is the user's to fix: say which one, without a traceback
            raise error(f"cannot load plugin '{ep.name}' ({ep.value}) from group {group}: {e}") from None


def plugin_source(ep) -> str:
    """Where an entry point comes from, for messages: `plugin 'name' (module:obj) from dist version`."""
    dist = getattr(ep, "dist", None)
    where = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
    return f"plugin '{ep.name}' ({ep.value}) from {where}"


_REGISTRY: Registry | None = None


def registry() -> Registry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry()
    return _REGISTRY


def reset_registry() -> None:
    """Forget everything loaded (tests that install plugins call this)."""
    global _REGISTRY
    _REGISTRY = None
    from . import parser

    parser._PARSERS.clear()
