"""Carry the committed tuning winners over to the current schedule version where a pass the lowering gained leaves
their kernels' schedules as they were; drop the others (they must be tuned again).

    python3 bench/carry_winners.py --added tile-longest-first [--winners irforge/tune/winners.json]
    python3 bench/carry_winners.py --widened tile-split-reduce.via=cluster
    python3 bench/carry_winners.py --new-option tile-split-reduce.across=blocks
    python3 bench/carry_winners.py --changed kernel-dependent-launch.prefetch-when=always,...

A winner is looked up by the schedule version it was tuned under (irforge/tune/space.py: the passes, their option
values and domains), so adding a pass to the lowering strands every winner. The old lowering is the current one
without the `--added` passes; the script checks that its version is the winners' own, then, for each winner,
captures the case it names, isolates the kernel (checking its key against the winner's), and lowers it at the
winner's point to the end of the tile level under both lowerings. Where the two tile-level programs print the
same, the point means the same schedule and the winner takes the current version; otherwise it is dropped. The
file is rewritten in place; a line per winner says which.

`--widened PASS.OPTION=VALUE` is for an option's domain that gained a value (which must not be the option's
default, so that every point the winners name lowers as it did): the old version is the current lowering's with
that value taken out of the domain; winners of that version whose points do not use the value take the current
version.

`--changed PASS.OPTION=OLD,...` is for option values the lowering's pipelines changed (OLD: the value before): the
old lowering is the current one with those values put back; a winner is carried where its kernel, lowered at its
point through the last changed pass under both lowerings, prints the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--added", help="comma-separated passes the lowering gained since the winners")
    how.add_argument("--widened", help="PASS.OPTION=VALUE: a value an option's domain gained since the winners")
    how.add_argument("--new-option", help="PASS.OPTION=VALUE: an option gained since the winners, VALUE the old way")
    how.add_argument("--changed", help="PASS.OPTION=OLD,...: option values the lowering changed, OLD the old ones")
    ap.add_argument("--winners", default=str(ROOT / "irforge/tune/winners.json"))
    args = ap.parse_args()
    if args.widened:
        return _widened(args.widened, Path(args.winners))
    if args.new_option:
        return _new_option(args.new_option, Path(args.winners))
    if args.changed:
        return _changed(args.changed, Path(args.winners))

    from irforge.tune.space import space_version, split_lowering

    added = set(args.added.split(","))
    prefix, new = split_lowering()
    old = [sp for sp in new if sp.pass_.name not in added]
    if len(old) == len(new):
        sys.exit(f"none of {sorted(added)} is in the current lowering")
    path = Path(args.winners)
    data = _winners_of(path, space_version(old), str(sorted(added)))
    new_tile = _tile_schedule(new)
    old_tile = [sp for sp in new_tile if sp.pass_.name not in added]

    def same(module, w) -> bool:
        return _tile_text(module, old_tile, w["winner"]) == _tile_text(module, new_tile, w["winner"])

    return _carry(path, data, prefix, space_version(new), same, "the new lowering schedules it differently")


def _widened(spec: str, path: Path) -> int:
    from irforge.pass_manager import Choices
    from irforge.registry import registry
    from irforge.tune.space import space_version, split_lowering

    name, _, value = spec.partition("=")
    pass_name, _, option = name.rpartition(".")
    opt = registry().pass_class(pass_name).options[option]
    added = opt.check(value)
    if added == opt.default or added not in opt.domain:
        sys.exit(f"{value} must be in the domain of {name} and not its default")
    _, new = split_lowering()
    domain = opt.domain
    opt.domain = Choices(tuple(v for v in domain.values() if v != added))
    try:
        old_version = space_version(new)
    finally:
        opt.domain = domain
    data = _winners_of(path, old_version, spec)
    kept = [w for w in data["winners"] if w["winner"].get(pass_name, {}).get(option) != added]
    for w in data["winners"]:
        print(f"{w['name']}: {'carried over' if w in kept else f'dropped: its point has {spec}'}")
    print(f"{len(kept)} of {len(data['winners'])} winners carried over")
    data["winners"] = [{**w, "version": space_version(new)} for w in kept]
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return 0


def _new_option(spec: str, path: Path) -> int:
    from irforge.registry import registry
    from irforge.tune.space import space_version, split_lowering

    name, _, value = spec.partition("=")
    pass_name, _, option = name.rpartition(".")
    cls = registry().pass_class(pass_name)
    old_way = cls.options[option].check(value)
    prefix, new = split_lowering()
    options = cls.options
    cls.options = {k: v for k, v in options.items() if k != option}
    try:
        old_version = space_version(new)
    finally:
        cls.options = options
    data = _winners_of(path, old_version, name)
    tile = _tile_schedule(new)

    def same(module, w) -> bool:
        pinned = {**w["winner"], pass_name: {**w["winner"].get(pass_name, {}), option: old_way}}
        return _tile_text(module, tile, w["winner"], bare=True) == _tile_text(module, tile, pinned, bare=True)

    return _carry(path, data, prefix, space_version(new), same, f"it lowers differently without {spec}")


def _changed(spec: str, path: Path) -> int:
    from dataclasses import replace

    from irforge.registry import registry
    from irforge.tune.space import space_version, split_lowering

    old_values: dict[str, dict[str, object]] = {}
    for item in spec.split(","):
        name, _, value = item.partition("=")
        pass_name, _, option = name.rpartition(".")
        cls = registry().pass_class(pass_name)
        if cls is None or option not in cls.options:
            sys.exit(f"--changed {item}: no option {option!r} of a pass {pass_name!r}")
        try:
            old_values.setdefault(pass_name, {})[option] = cls.options[option].check(cls.options[option].parse(value))
        except ValueError as e:
            sys.exit(f"--changed {item}: {e}")
    prefix, new = split_lowering()
    old = [
        replace(sp, pass_=sp.pass_.with_options(old_values[sp.pass_.name])) if sp.pass_.name in old_values else sp
        for sp in new
    ]
    changed = [i for i, sp in enumerate(new) if sp.pass_.name in old_values]
    if not changed:
        sys.exit(f"none of {sorted(old_values)} is in the current lowering")
    if space_version(old) == space_version(new):
        sys.exit(f"the lowering already has {spec}")
    data = _winners_of(path, space_version(old), spec)
    upto = changed[-1] + 1

    def same(module, w) -> bool:
        return _tile_text(module, old[:upto], w["winner"]) == _tile_text(module, new[:upto], w["winner"])

    return _carry(path, data, prefix, space_version(new), same, f"it lowers differently than with {spec}")


def _winners_of(path: Path, version: str, without: str) -> dict:
    """The winners file, which must hold the winners of `version` (the lowering `without` the change) alone."""
    data = json.loads(path.read_text())
    versions = {w["version"] for w in data["winners"]}
    if versions != {version}:
        sys.exit(f"the winners are of {sorted(versions)}; the lowering without {without} is {version}")
    return data


def _carry(path: Path, data: dict, prefix, version: str, same, dropped: str) -> int:
    """Keep (re-keyed to `version`) the winners whose kernels `same(isolated kernel, winner)` says the change
    leaves as they were; rewrite the file and say which, `dropped` why the others went."""
    from irforge.bench.case import suite
    from irforge.tune.command import capture_case
    from irforge.tune.space import isolate, kernel_key, kernels_of

    cases = {c.id: c for name in ("seed84", "llm") for c in suite(name)}
    kept, captured = [], {}
    for w in data["winners"]:
        case_id, kernel = w["name"].split("/")
        if case_id not in captured:
            captured[case_id] = capture_case(cases[case_id], prefix)
        (k,) = [k for k in kernels_of(captured[case_id]) if k.attributes["sym_name"] == kernel]
        module = isolate(k)
        if kernel_key(module) != w["hash"]:
            sys.exit(f"{w['name']}: its kernel is no longer the one tuned (key {kernel_key(module)[:12]})")
        carried = same(module, w)
        print(f"{w['name']}: {'carried over' if carried else f'dropped: {dropped}'}")
        if carried:
            kept.append({**w, "version": version})
    print(f"{len(kept)} of {len(data['winners'])} winners carried over")
    data["winners"] = kept
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return 0


def _tile_schedule(schedule: list) -> list:
    """The passes of `schedule` up to the tile level's end."""
    return schedule[: next(i for i, sp in enumerate(schedule) if sp.pass_.leaves_level() == "kernel")]


def _tile_text(module, schedule, point, bare: bool = False) -> str:
    """The module lowered by `schedule` at `point`, printed (`bare`: without the `tune` attributes that name it)."""
    from irforge.pass_manager import PassManager
    from irforge.printer import print_module
    from irforge.tune.space import set_tune

    m = module.clone()
    set_tune(m, point)
    PassManager(schedule).run(m)
    if bare:
        set_tune(m, {})
    return print_module(m)


if __name__ == "__main__":
    sys.exit(main())
