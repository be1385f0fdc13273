from __future__ import annotations

from irforge.ir import Operation
from irforge.pass_manager import Pass, option


class ApplyTuning(Pass):
    """Write each kernel's tuned schedule from the tuning database into its `tune` attribute.

    For every loop kernel, the database (`irforge tune` fills it) is looked up by the kernel's structural hash, the
    target's arch and the schedule's version; a winner becomes the kernel's `tune = {pass = {option = value}}`
    attribute, which the tile passes then apply: the printed IR plus the rest of the pipeline reproduce the tuned
    program. A kernel that already has a `tune` attribute keeps it. A winner that the passes refuse now (they changed
    since it was tuned) is skipped, with a remark. Without a database nothing changes.
    """

    name = "apply-tuning"
    input_level = "loop"
    db: str = option("", help="the tuning database (default: $IRFORGE_TUNE_DB, else ~/.cache/irforge/tune.sqlite)")
    version: str = option(
        "", help="the schedule the winners were tuned for (default: the default lowering's, after the loop level)"
    )

    def run(self, op: Operation) -> None:
        from irforge.diagnostics import IRForgeError
        from irforge.target import target
        from irforge.tune.db import Key, TuneDB
        from irforge.tune.space import Space, isolate, kernel_key, kernels_of, space_version, split_lowering, tune_attr

        kernels = [k for k in kernels_of(op) if "tune" not in k.attributes]
        db = TuneDB.existing(self.db or None) if kernels else None
        if db is None:
            return
        _, suffix = split_lowering()
        version = self.version or space_version(suffix)
        try:
            for k in kernels:
                try:
                    iso = isolate(k)
                except IRForgeError:
                    continue  # not a kernel that can be tuned alone
                entry = db.entry(Key(kernel_key(iso), target().arch, version))
                if entry is None or not entry.winner:
                    continue
                space = Space(iso, suffix)
                try:
                    space.schedule_of(space.values_of(entry.winner))
                except IRForgeError as e:
                    self.remark(k, f"the database's schedule is refused now, skipped: {e.message}")
                    continue
                k.attributes["tune"] = tune_attr(entry.winner)
                gain = f" ({entry.speedup:.2f}x the heuristic's)" if entry.speedup else ""
                self.remark(k, f"tuned schedule from {db.path}{gain}")
        finally:
            db.close()
