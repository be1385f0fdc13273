"""The tuning database: SQLite, one row per tuned kernel and one per measured candidate.

A kernel is keyed by (structural hash of the isolated loop-level kernel, GPU arch, version of the schedule: the
passes after the loop level with their option values and domains, `space.space_version`), so identical kernels in
any program share their row and tune once. A row holds the winner (the `tune` attribute's content: only the options
that differ from the pipeline's), its time and the heuristic's, and what the search cost; `candidates` holds every
point measured (or failed) with its status and median.

    irforge tune ... --db PATH            # default: $IRFORGE_TUNE_DB, else ~/.cache/irforge/tune.sqlite

A database is seeded, when created, from the committed winners file (`winners.json` beside this module: tuned
winners of the benchmark suites, keyed the same way), so a fresh checkout benches tuned without retuning;
`irforge tune --export FILE` writes such a file from a database.
"""

from __future__ import annotations

import datetime
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

SEED = Path(__file__).with_name("winners.json")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kernels (
    hash TEXT NOT NULL, arch TEXT NOT NULL, version TEXT NOT NULL,
    name TEXT NOT NULL,             -- where it was first tuned: program / kernel
    winner TEXT NOT NULL,           -- JSON {pass: {option: value}}; {} when the heuristic's point won
    best_s REAL, baseline_s REAL,   -- medians of the winner and of the heuristic's point (confirmed together)
    candidates INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, pruned INTEGER NOT NULL DEFAULT 0,
    seconds REAL, gpu TEXT, source TEXT, tuned_at TEXT,
    PRIMARY KEY (hash, arch, version)
);
CREATE TABLE IF NOT EXISTS candidates (
    hash TEXT NOT NULL, arch TEXT NOT NULL, version TEXT NOT NULL,
    point TEXT NOT NULL,            -- JSON, as `winner`
    status TEXT NOT NULL,           -- ok, wrong, error, fault, timeout, crash
    median_s REAL, reps INTEGER, detail TEXT,
    phase TEXT NOT NULL             -- rank (a short measurement) or confirm (the top few, measured longer)
);
CREATE INDEX IF NOT EXISTS candidates_key ON candidates (hash, arch, version);
"""


def default_path() -> Path:
    env = os.environ.get("IRFORGE_TUNE_DB")
    return Path(env) if env else Path.home() / ".cache" / "irforge" / "tune.sqlite"


@dataclass(frozen=True)
class Key:
    hash: str
    arch: str
    version: str

    def short(self) -> str:
        return self.hash[:12]


@dataclass
class Entry:
    key: Key
    name: str
    winner: dict
    best_s: float | None
    baseline_s: float | None
    candidates: int = 0
    failed: int = 0
    pruned: int = 0
    seconds: float | None = None
    gpu: str | None = None
    source: str | None = None
    tuned_at: str | None = None

    @property
    def speedup(self) -> float | None:
        return self.baseline_s / self.best_s if self.best_s and self.baseline_s else None


def point_from_json(text: str) -> dict:
    """A stored point (JSON has lists where option values are tuples)."""
    return {
        p: {k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()} for p, opts in json.loads(text).items()
    }


class TuneDB:
    def __init__(self, path: str | Path | None = None, *, seed: Path | None = SEED):
        self.path = Path(path) if path else default_path()
        new = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        self.conn.executescript(_SCHEMA)
        if new and seed is not None and seed.exists():
            self.import_winners(seed)

    @classmethod
    def existing(cls, path: str | Path | None = None) -> TuneDB | None:
        """The database at `path` (or the default place) if there is one: replay never creates it."""
        p = Path(path) if path else default_path()
        return cls(p, seed=None) if p.exists() else None

    def close(self) -> None:
        self.conn.close()

    # ---- kernels ------------------------------------------------------------------------------------------------
    def entry(self, key: Key) -> Entry | None:
        row = self.conn.execute(
            "SELECT * FROM kernels WHERE hash=? AND arch=? AND version=?", (key.hash, key.arch, key.version)
        ).fetchone()
        return self._entry(row) if row else None

    def entries(self) -> list[Entry]:
        return [self._entry(r) for r in self.conn.execute("SELECT * FROM kernels ORDER BY tuned_at, name")]

    def _entry(self, row) -> Entry:
        cols = [d[0] for d in self.conn.execute("SELECT * FROM kernels LIMIT 0").description]
        r = dict(zip(cols, row))
        key = Key(r.pop("hash"), r.pop("arch"), r.pop("version"))
        r["winner"] = point_from_json(r["winner"])
        return Entry(key, **r)

    def record(self, e: Entry, candidates: list[dict]) -> None:
        """Store a kernel's result and its candidates (replacing an earlier tuning of the same key)."""
        k = (e.key.hash, e.key.arch, e.key.version)
        with self.conn:
            self.conn.execute("DELETE FROM candidates WHERE hash=? AND arch=? AND version=?", k)
            self.conn.execute(
                "INSERT OR REPLACE INTO kernels VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    *k,
                    e.name,
                    json.dumps(e.winner, sort_keys=True),
                    e.best_s,
                    e.baseline_s,
                    e.candidates,
                    e.failed,
                    e.pruned,
                    e.seconds,
                    e.gpu,
                    e.source,
                    e.tuned_at or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                ),
            )
            self.conn.executemany(
                "INSERT INTO candidates VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (
                        *k,
                        json.dumps(c["point"], sort_keys=True),
                        c["status"],
                        c.get("median_s"),
                        c.get("reps"),
                        c.get("detail"),
                        c["phase"],
                    )
                    for c in candidates
                ],
            )

    def winners_digest(self) -> str:
        """A digest of every winner: what a tuned compilation depends on."""
        import hashlib

        rows = self.conn.execute("SELECT hash, arch, version, winner FROM kernels ORDER BY hash, arch, version")
        return hashlib.sha256(repr(rows.fetchall()).encode()).hexdigest()[:16]

    def candidates(self, key: Key) -> list[dict]:
        rows = self.conn.execute(
            "SELECT point, status, median_s, reps, detail, phase FROM candidates WHERE hash=? AND arch=? AND version=?"
            " ORDER BY phase DESC, median_s IS NULL, median_s",
            (key.hash, key.arch, key.version),
        )
        return [
            {"point": point_from_json(p), "status": s, "median_s": m, "reps": n, "detail": d, "phase": ph}
            for p, s, m, n, d, ph in rows
        ]

    # ---- the winners file ---------------------------------------------------------------------------------------
    def export_winners(self, path: str | Path, version: str | None = None) -> tuple[int, int]:
        """Write the winners (no candidates) as a winners file, those of schedule `version` only when given (a
        winner of another version is stale: no kernel of that schedule looks it up); returns (written, left out)."""
        every = self.entries()
        entries = [e for e in every if version is None or e.key.version == version]
        data = {
            "format": 1,
            "about": "tuned winners, keyed as the tuning database keys kernels (irforge/tune/db.py)",
            "winners": [
                {
                    "hash": e.key.hash,
                    "arch": e.key.arch,
                    "version": e.key.version,
                    "name": e.name,
                    "winner": e.winner,
                    "best_s": e.best_s,
                    "baseline_s": e.baseline_s,
                    "gpu": e.gpu,
                    "tuned_at": e.tuned_at,
                }
                for e in entries
            ],
        }
        Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return len(entries), len(every) - len(entries)

    def import_winners(self, path: str | Path) -> int:
        """Add the winners of a winners file that this database does not hold; returns how many."""
        data = json.loads(Path(path).read_text())
        n = 0
        for w in data.get("winners", []):
            key = Key(w["hash"], w["arch"], w["version"])
            if self.entry(key) is None:
                fields = {k: w.get(k) for k in ("best_s", "baseline_s", "gpu", "tuned_at")}
                winner = point_from_json(json.dumps(w["winner"]))
                self.record(Entry(key, w["name"], winner, source="winners file", **fields), [])
                n += 1
        return n


def pipeline_tuning(pipeline: str) -> str:
    """For a pipeline that replays tuned schedules (`apply-tuning`), a digest of the winners it reads ("" for any
    other pipeline, or one whose database does not exist)."""
    from irforge.pipeline import expand, parse_pipeline

    if "apply-tuning" not in pipeline:
        return ""
    parts = []
    for sp in expand(parse_pipeline(pipeline), "<pipeline>"):
        if sp.pass_.name == "apply-tuning":
            db = TuneDB.existing(sp.pass_.db or None)
            parts.append(db.winners_digest() if db else "none")
            if db:
                db.close()
    return ",".join(parts)
