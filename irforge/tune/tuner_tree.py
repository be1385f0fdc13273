"""The tuning space as the search (`mcts.SPMCTS`) sees it."""

from __future__ import annotations

from . import cost
from .space import Space
from .tuner_records import KernelResult


def _seconds(features) -> float | None:
    return cost.seconds(features) if features is not None else None


class _Tree:
    """The space as the search sees it: children with the cost model's predictions, counts kept."""

    def __init__(self, space: Space, result: KernelResult):
        self.space, self.r = space, result
        self.depth = len(space.decisions)

    def is_leaf(self, state) -> bool:
        return self.space.is_leaf(state)

    def expand(self, state):
        ex = self.space.expand(state)
        self.r.refused += len(ex.refused)
        self.r.merged += len(ex.merged)
        aliases: dict = {}
        for v, kept in ex.merged:
            aliases.setdefault(kept, []).append(v)
        return [(v, c, _seconds(c.features), aliases.get(v, ())) for v, c in ex.children]

    def values(self, state) -> tuple:
        return self.space.decisions[len(state.values)].values

    def step(self, state, value):
        return self.space.step(state, value)

    def values_of(self, state) -> tuple:
        return state.values

    def key(self, leaf) -> str:
        return self.space.finish(leaf).digest

    def predict(self, leaf) -> float | None:
        return _seconds(leaf.features)
