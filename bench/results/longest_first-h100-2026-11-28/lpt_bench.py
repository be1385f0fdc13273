# c71 experiment: the attention kernel with its query tiles walked outermost, last tile first (longest-processing-time
# order), applied to variants whose pipeline is the expanded default (starts with torch-to-tensor)
import re
import sys

import irforge.bench.compile_cache as cc

orig = cc.compile_case


def patched(case, pipeline, arch):
    c = orig(case, pipeline, arch)
    if pipeline.startswith("torch-to-tensor,") and "lpt" in pipeline_names.get(pipeline, "") and c.text:
        tiles = int(re.search(r"const int ta2 = w % (\d+);", c.text).group(1))
        grid = int(re.search(r"grid\((\d+)\)", c.text).group(1))
        heads = grid // tiles
        new = f"const int w = (bx % {heads}) * {tiles} + ({tiles - 1} - bx / {heads});"
        assert "const int w = bx;" in c.text
        c.text = c.text.replace("const int w = bx;", new, 1)
        print("lpt:", case.id, new, file=sys.stderr)
    return c


pipeline_names = {}
for a in sys.argv:
    if "=" in a and a.split("=", 1)[0].startswith("lpt"):
        pipeline_names[a.split("=", 1)[1]] = a.split("=", 1)[0]
cc.compile_case = patched
from irforge.tools.cli import main  # noqa: E402

sys.exit(main())
