"""Single-player Monte Carlo tree search (SP-MCTS) over a tree of decisions, minimizing a measured time.

The tree is anything with `depth` (decisions from the root to a leaf), `expand(state) -> [(value, child state,
predicted seconds or None, aliases)]` (every child, pruned and merged: aliases are the other values that lead to
it), `values(state)` (the next decision's values), `step(state, value) -> child state or None` (one child, cheaply:
None when refused), `is_leaf(state)`, `values_of(state)` (the values decided so far), `key(leaf state)` (what makes
two leaves the same point) and `predict(leaf state)`; `Space` is one (through the tuner), the tests use synthetic
ones. Each round:

1. **select** from the root, through nodes expanded with all their children: the child with the best score, UCB
   `Q + c * sqrt(ln N / n)` among the first `1 + widen * sqrt(N)` children in the prior's order and the
   incumbent's (progressive widening: an unvisited one before any revisit), or, once the prior has proved
   reliable, PUCT `Q + c_puct * P * sqrt(N) / (1 + n)` among all. `Q` is the node's best time found so far
   (max-reward backup: the search looks for the one best point, not a good average) on a log scale from the
   median reported time (0) to the best (1). `P` is the prior over siblings, `(fastest / predicted) ** beta`
   normalized. The first unvisited child reached joins the tree.
2. **roll out** from it to a leaf, one `step` per decision (no siblings computed: rollouts are cheap): each
   decision keeps the incumbent's value (the best point so far, or the starting point the caller gives) but for
   `changes` of them on average, drawn uniformly (schedules are mostly separable: a few decisions changed at a
   time are good moves, however many decisions there are); a refused step draws again. Of `samples` such
   rollouts, the leaf the prior predicts fastest (among those not proposed yet) is taken.
3. the leaf is handed out (`propose`, with the tree node it hangs from) and its time comes back later (`report`;
   None for a point that failed or was pruned once compiled). Visits are counted when a leaf is proposed, so
   several leaves can be out at once; a leaf (by `key`) is never proposed twice; a node whose leaves have all been
   proposed is exhausted, and `propose` returns None when the root is (or when `tries` descents in a row found
   nothing new that the prior deems likely).

A point measured before the search (`start`: the heuristics' own) is the incumbent until a reported time beats it,
and every node on its path carries its time once it joins the tree (as a node below which any reported point lies
does). With a `cutoff`, children and rollout leaves the prior predicts slower than it are left out (`unlikely`):
the tuner puts it at a multiple of the heuristics' predicted time, so the budget goes where the speed is.

The prior is *reliable* once `min_pairs` reported leaves carry a prediction and a time, and their ranks agree
(Spearman's rho >= `reliable_rho`). Everything random draws from one seeded generator: with the same reports in the
same order, a search proposes the same leaves.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass


@dataclass(eq=False)
class Node:
    state: object
    parent: Node | None = None
    value: object = None  # the decision's value on the edge from the parent
    predicted: float | None = None  # the prior's seconds
    aliases: tuple = ()  # other values of the decision that lead to this same child
    children: list[Node] | None = None  # None until expanded
    visits: int = 0
    best: float = math.inf  # the best time reported below
    exhausted: bool = False  # nothing left to propose below
    leaf: bool = False

    def leads_to(self, value) -> bool:
        return value == self.value or value in self.aliases

    def holds(self, values: tuple) -> bool:
        """Whether the point `values` lies below this node."""
        path = self.path()[1:]
        return len(values) >= len(path) and all(n.leads_to(v) for n, v in zip(path, values))

    def path(self) -> list[Node]:
        out, n = [], self
        while n is not None:
            out.append(n)
            n = n.parent
        return out[::-1]


@dataclass(eq=False)
class Proposal:
    """A leaf to measure: its state, the point's values, and the tree node the rollout that found it started at."""

    node: Node
    state: object
    values: tuple
    predicted: float | None = None


class SPMCTS:
    def __init__(
        self,
        tree,
        root_state,
        *,
        seed: int = 0,
        c: float = 0.5,
        c_puct: float = 3.0,
        beta: float = 2.0,
        widen: float = 1.0,
        changes: float = 1.5,
        samples: int = 4,
        min_pairs: int = 8,
        reliable_rho: float = 0.5,
        cutoff: float = math.inf,
        tries: int = 200,
    ):
        self.tree = tree
        self.rng = random.Random(seed)
        self.c, self.c_puct, self.beta, self.widen = c, c_puct, beta, widen
        self.change = min(1.0, changes / max(tree.depth, 1))  # the chance each decision leaves the incumbent
        self.samples = samples
        self.min_pairs, self.reliable_rho = min_pairs, reliable_rho
        self.cutoff = cutoff  # predicted seconds past which a child or a leaf is not worth measuring
        self.unlikely = 0  # children and leaves left out for it
        self.tries = tries
        self.root = Node(root_state, leaf=tree.is_leaf(root_state))
        self.best_time = math.inf
        self.best: Proposal | None = None
        self.incumbent: tuple = ()  # the values of the best point so far (or a starting point given)
        self.pairs: list[tuple[float, float]] = []  # (predicted, measured) of reported leaves
        self.times: list[float] = []  # every reported time, sorted
        self.proposed: set = set()  # keys of the leaves handed out
        self.reported: list[tuple[tuple, float]] = []  # (values, seconds) of every leaf with a time

    def start(self, values: tuple, seconds: float, key=None) -> None:
        """A point measured before the search (the heuristics' own): it is the incumbent until something beats
        it, its time bounds the scale, the nodes on its path will carry it as their best once they join the tree,
        and it is not proposed again (`key`)."""
        if key is not None:
            self.proposed.add(key)
        self.incumbent = values
        if seconds is not None and math.isfinite(seconds):
            self.root.best = min(self.root.best, seconds)
            self.best_time = min(self.best_time, seconds)
            bisect.insort(self.times, seconds)
            self.reported.append((values, seconds))

    # ---- the prior ----------------------------------------------------------------------------------------------
    @property
    def reliable(self) -> bool:
        return len(self.pairs) >= self.min_pairs and spearman(self.pairs) >= self.reliable_rho

    def _priors(self, nodes: list[Node]) -> list[float]:
        preds = [n.predicted for n in nodes]
        finite = [p for p in preds if p is not None and math.isfinite(p) and p > 0]
        if not finite:
            return [1.0 / len(nodes)] * len(nodes)
        fastest = min(finite)
        w = [(fastest / p) ** self.beta if p is not None and math.isfinite(p) and p > 0 else 1e-3 for p in preds]
        total = sum(w)
        return [x / total for x in w]

    # ---- proposing ----------------------------------------------------------------------------------------------
    def propose(self) -> Proposal | None:
        """The next leaf to measure, or None when every leaf has been proposed (or `tries` descents in a row found
        nothing new and likely: what is left is not worth measuring)."""
        for _ in range(self.tries):
            if self.root.exhausted:
                break
            node = self._descend()
            if node is None:
                continue  # found empty and marked exhausted: start again from the root
            state = node.state if node.leaf else self._rollout(node.state)
            if node.leaf:
                node.exhausted = True
                self._settle(node.parent)
            for n in node.path():
                n.visits += 1  # a rollout that found nothing new still grows the tree: the node is expanded next
            if state is None:
                continue
            key = self.tree.key(state)
            if key in self.proposed:
                continue
            self.proposed.add(key)
            return Proposal(node, state, self.tree.values_of(state), self.tree.predict(state))
        return None

    def _descend(self) -> Node | None:
        node = self.root
        while not node.leaf:
            live = self._live(node)
            if not live:
                return None
            if self.reliable:
                child = max(live, key=lambda n: self._puct(node, n, live))
            else:
                # progressive widening: the prior's best few children and the incumbent's, one more as the node is
                # revisited
                width = 1 + int(self.widen * math.sqrt(node.visits))
                depth = len(node.path()) - 1
                mine = [n for n in live[width:] if depth < len(self.incumbent) and n.leads_to(self.incumbent[depth])]
                eligible = live[:width] + mine
                fresh = [n for n in eligible if n.visits == 0]
                child = fresh[0] if fresh else max(eligible, key=lambda n: self._ucb(node, n))
            if child.visits == 0:
                return child
            node = child
        return node

    def _rollout(self, state):
        """The most promising of `samples` leaves below `state` (by the prior) not proposed yet, or None."""
        leaves = [leaf for leaf in (self._walk(state) for _ in range(self.samples)) if leaf is not None]
        leaves = [leaf for leaf in leaves if self.tree.key(leaf) not in self.proposed]
        scored = [(self.tree.predict(s), s) for s in leaves]
        likely = [(p, s) for p, s in scored if not self._unlikely(p)]
        self.unlikely += len(scored) - len(likely)
        return min(likely, key=lambda ps: _finite_or_inf(ps[0]), default=(None, None))[1]

    def _unlikely(self, predicted: float | None) -> bool:
        """Predicted past the cutoff (an unknown prediction is not)."""
        return predicted is not None and not predicted <= self.cutoff

    def _walk(self, state):
        """A leaf below `state`, a step at a time (None when every value of some decision is refused)."""
        depth = len(self.tree.values_of(state))
        while not self.tree.is_leaf(state):
            values = list(self.tree.values(state))
            want = self.incumbent[depth] if depth < len(self.incumbent) else None
            order = [want] if want in values and self.rng.random() >= self.change else []
            rest = [v for v in values if v not in order]
            self.rng.shuffle(rest)
            for v in order + rest:
                nxt = self.tree.step(state, v)
                if nxt is not None:
                    break
            else:
                return None
            state, depth = nxt, depth + 1
        return state

    def _live(self, node: Node) -> list[Node]:
        """The node's children that still have something to propose (expanding it first); an empty node is marked
        exhausted."""
        if node.children is None:
            children = [
                Node(state, node, value, predicted, tuple(aliases), leaf=self.tree.is_leaf(state))
                for value, state, predicted, aliases in self.tree.expand(node.state)
            ]
            node.children = [n for n in children if not self._unlikely(n.predicted)]
            self.unlikely += len(children) - len(node.children)
            node.children.sort(key=lambda n: _finite_or_inf(n.predicted))  # stable: ties keep the tree's order
            for n in node.children:
                n.best = min((t for values, t in self.reported if n.holds(values)), default=math.inf)
        live = [n for n in node.children if not n.exhausted]
        if not live:
            node.exhausted = True
            self._settle(node.parent)
        return live

    def _settle(self, node: Node | None) -> None:
        """Mark ancestors exhausted once all their children are."""
        while node is not None and node.children is not None and all(n.exhausted for n in node.children):
            node.exhausted = True
            node = node.parent

    def _q(self, n: Node) -> float:
        """The node's best time on a log scale from the median reported time (0) to the best (1)."""
        if not math.isfinite(n.best) or not self.times:
            return 0.0
        lo, mid = math.log(self.best_time), math.log(self.times[len(self.times) // 2])
        if mid <= lo:
            return 1.0 if n.best <= self.best_time else 0.0
        return min(1.0, max(0.0, (mid - math.log(n.best)) / (mid - lo)))

    def _ucb(self, parent: Node, n: Node) -> float:
        return self._q(n) + self.c * math.sqrt(math.log(max(parent.visits, 1)) / n.visits)

    def _puct(self, parent: Node, n: Node, siblings: list[Node]) -> float:
        p = self._priors(siblings)[siblings.index(n)]
        return self._q(n) + self.c_puct * p * math.sqrt(parent.visits) / (1 + n.visits)

    # ---- results ------------------------------------------------------------------------------------------------
    def report(self, proposal: Proposal, seconds: float | None) -> None:
        """The time a proposed leaf measured (None: it failed, or was pruned after compiling)."""
        if seconds is None or not math.isfinite(seconds):
            return
        for n in proposal.node.path():
            n.best = min(n.best, seconds)
        bisect.insort(self.times, seconds)
        self.reported.append((proposal.values, seconds))
        if proposal.predicted is not None and math.isfinite(proposal.predicted):
            self.pairs.append((proposal.predicted, seconds))
        if seconds < self.best_time:
            self.best_time, self.best = seconds, proposal
            self.incumbent = proposal.values


def _finite_or_inf(x) -> float:
    return x if x is not None and math.isfinite(x) else math.inf


def spearman(pairs: list[tuple[float, float]]) -> float:
    """Spearman's rank correlation of the pairs (ties get their mean rank)."""
    if len(pairs) < 2:
        return 0.0
    xs, ys = _ranks([p[0] for p in pairs]), _ranks([p[1] for p in pairs])
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    return cov / (sx * sy) if sx and sy else 0.0


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks
