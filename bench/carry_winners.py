"""Carry the committed tuning winners over to the current schedule version where a pass the lowering gained leaves
their kernels' schedules as they were; drop the others (they must be tuned again).

    python3 bench/carry_winners.py --added tile-longest-first [--winners irforge/tune/winners.json]

A winner is looked up by the schedule version it was tuned under (irforge/tune/space.py: the passes, their option
values and domains), so adding a pass to the lowering strands every winner. The old lowering is the current one
without the `--added` passes; the script checks that its version is the winners' own, then, for each winner,
captures the case it names, isolates the kernel (checking its key against the winner's), and lowers it at the
winner's point to the end of the tile level under both lowerings. Where the two tile-level programs print the
same, the point means the same schedule and the winner takes the current version; otherwise it is dropped. The
file is rewritten in place; a line per winner says which.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--added", required=True, help="comma-separated passes the lowering gained since the winners")
    ap.add_argument("--winners", default=str(ROOT / "irforge/tune/winners.json"))
    args = ap.parse_args()

    from irforge.bench.case import suite
    from irforge.tune.command import capture_case
    from irforge.tune.space import isolate, kernel_key, kernels_of, space_version, split_lowering

    added = set(args.added.split(","))
    prefix, new = split_lowering()
    old = [sp for sp in new if sp.pass_.name not in added]
    if len(old) == len(new):
        sys.exit(f"none of {sorted(added)} is in the current lowering")
    data = json.loads(Path(args.winners).read_text())
    versions = {w["version"] for w in data["winners"]}
    if versions != {space_version(old)}:
        sys.exit(f"the winners are of {sorted(versions)}; the lowering without {sorted(added)} is {space_version(old)}")
    cases = {c.id: c for name in ("seed84", "llm") for c in suite(name)}
    tile_end = next(i for i, sp in enumerate(new) if sp.pass_.leaves_level() == "kernel")
    new_tile = new[:tile_end]
    old_tile = [sp for sp in new_tile if sp.pass_.name not in added]

    kept, captured = [], {}
    for w in data["winners"]:
        case_id, kernel = w["name"].split("/")
        if case_id not in captured:
            captured[case_id] = capture_case(cases[case_id], prefix)
        (k,) = [k for k in kernels_of(captured[case_id]) if k.attributes["sym_name"] == kernel]
        module = isolate(k)
        if kernel_key(module) != w["hash"]:
            sys.exit(f"{w['name']}: its kernel is no longer the one tuned (key {kernel_key(module)[:12]})")
        same = _tile_text(module, old_tile, w["winner"]) == _tile_text(module, new_tile, w["winner"])
        print(f"{w['name']}: {'carried over' if same else 'dropped: the new lowering schedules it differently'}")
        if same:
            kept.append({**w, "version": space_version(new)})
    print(f"{len(kept)} of {len(data['winners'])} winners carried over")
    data["winners"] = kept
    Path(args.winners).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return 0


def _tile_text(module, schedule, point) -> str:
    from irforge.pass_manager import PassManager
    from irforge.printer import print_module
    from irforge.tune.space import set_tune

    m = module.clone()
    set_tune(m, point)
    PassManager(schedule).run(m)
    return print_module(m)


if __name__ == "__main__":
    sys.exit(main())
