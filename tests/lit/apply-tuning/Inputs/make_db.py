"""Make a tuning database holding, for every loop kernel of an IR file, the given point (JSON) as its winner, keyed
as `irforge tune` keys kernels (for the target's arch and the default lowering's schedule)."""

import json
import sys

from irforge.parser import parse_module
from irforge.target import target
from irforge.tune.db import Entry, Key, TuneDB
from irforge.tune.space import isolate, kernel_key, kernels_of, space_version, split_lowering

path, db_path, point = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with open(path, encoding="utf-8") as f:
    module = parse_module(f.read(), path)
version = space_version(split_lowering()[1])
db = TuneDB(db_path, seed=None)
for k in kernels_of(module):
    key = Key(kernel_key(isolate(k)), target().arch, version)
    db.record(Entry(key, k.attributes["sym_name"], point, 1e-6, 2e-6), [])
