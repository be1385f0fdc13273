"""The per-kernel profile of a compiled model step (irforge.models.profile), on the CPU: the kernels of a tiny
Llama's linked decode step with their launch counts and bytes, and the table the GPU run prints, from given times."""

from __future__ import annotations

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def decode_module():
    from test_models import tiny

    from irforge.models import compile_model
    from irforge.models.gpu import link

    model = compile_model(tiny("llama"), batch=1, prompt_len=4, max_len=8, level="cuda", cache=False, parallel=False)
    return model, link(model.steps["decode"])


def test_kernels_of_a_linked_step(decode_module):
    from irforge.dialects.cuda import ops as C

    from irforge.models.profile import kernels

    model, module = decode_module
    rows = kernels(module)
    prog = next(op for op in module.body.ops if isinstance(op, C.ProgramOp))
    launches = [op.attributes["callee"].name for op in prog.body.ops if isinstance(op, C.LaunchOp)]
    assert [k.name for k in rows] == list(dict.fromkeys(launches))  # in the order of their first launch
    assert {k.name: k.launches for k in rows} == {n: launches.count(n) for n in set(launches)}
    assert {k.launches for k in rows if k.name.startswith("layer_")} == {3}  # once per layer
    weight = model.param_types["model.layers.0.self_attn.q_proj.weight"]
    reads_q = [k for k in rows if str(weight) in k.args]
    assert reads_q and all(k.nbytes >= weight.numel * weight.dtype.bytes for k in reads_q)
    assert all(k.threads >= 1 and k.nbytes > 0 for k in rows)


def test_table_sorts_by_time_and_shares_it(decode_module):
    from irforge.models.profile import kernels, table

    _, module = decode_module
    rows = kernels(module)
    rng = np.random.default_rng(0)
    times = [(k.name, float(rng.uniform(0.001, 0.01))) for k in rows for _ in range(k.launches)]
    text = table(rows, 1e12, times).splitlines()
    body = text[1:-2]
    totals = {}
    for name, ms in times:
        totals[name] = totals.get(name, 0.0) + ms
    assert [line.split()[0] for line in body] == sorted(totals, key=lambda n: -totals[n])
    shares = [float(line.split()[-1].rstrip("%")) for line in body]
    assert sum(shares) == pytest.approx(100, abs=0.1 * len(shares))
    first = next(k for k in rows if k.name == body[0].split()[0])
    each_us = totals[first.name] / first.launches * 1e3
    assert float(body[0].split()[-4]) == pytest.approx(each_us, abs=0.01)
    assert float(body[0].split()[-3].rstrip("%")) == pytest.approx(100 * first.nbytes / 1e12 * 1e6 / each_us, abs=1)
    assert text[-2].startswith(f"{len(times)} launches: {sum(totals.values()):.3f} ms")
