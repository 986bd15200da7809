"""Many marginal queries of one graphical model at once, for scoring rounds (AIM's 10^5 candidates).

A candidate whose attributes fall in two or more of the model's independent components (cliques
joined by empty separators) has as marginal the outer product of its parts' marginals, divided by
the total once per extra part. On wide tables early in AIM that is most candidates: they are
grouped by the shapes of their parts and each group is one broadcast product and one L1 sum in
numpy, instead of a Python query per candidate. Post-processing: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .graphical_model import GraphicalModel

# candidates of one group are stacked this many cells at a time (bounds the temporaries)
GROUP_CELLS = 1 << 20


def l1_errors(model: GraphicalModel, cliques: Sequence[tuple[str, ...]], tables: Sequence[np.ndarray],
              project=None) -> np.ndarray:
    """``[‖tables[i] − model.project(cliques[i])‖₁ for i]`` (each table flat over its clique in the
    order given). ``project``: the query for candidates inside one component (default
    ``model.project``; pass an uncached one to keep the model's cache small). Same values as the
    per-candidate loop up to rounding in the order of sums."""
    project = project or model.project
    d = model.domain
    out = np.empty(len(cliques))
    groups: dict[tuple, list[int]] = {}
    split: list[list[tuple[str, ...]]] = []
    for i, r in enumerate(cliques):
        parts = model._components(tuple(r))
        split.append(parts)
        if len(parts) == 1:
            out[i] = np.abs(tables[i] - project(r)).sum()
        else:
            order = tuple(a for p in parts for a in p)
            perm = tuple(r.index(a) for a in order)
            groups.setdefault((tuple(tuple(d.sizes(p)) for p in parts), perm), []).append(i)
    total = model.total
    parts_seen: dict[tuple[str, ...], np.ndarray] = {}

    def marginal(p: tuple[str, ...]) -> np.ndarray:  # each part's marginal once per call (many share it)
        hit = parts_seen.get(p)
        if hit is None:
            hit = parts_seen[p] = project(p)
        return hit

    for (part_sizes, perm), idx in groups.items():
        part_cells = [int(np.prod(s)) for s in part_sizes]
        cells = int(np.prod(part_cells))
        flat = [n for s in part_sizes for n in s]  # sizes in the parts' attribute order
        sizes_r = tuple(flat[perm.index(k)] for k in range(len(perm)))  # sizes in the clique's order
        step = max(1, GROUP_CELLS // max(cells, 1))
        for lo in range(0, len(idx), step):
            chunk = idx[lo:lo + step]
            prod = None
            for j in range(len(part_cells)):
                rows = np.stack([marginal(split[i][j]) for i in chunk])
                prod = rows if prod is None else (prod[:, :, None] * (rows[:, None, :] / total)).reshape(len(chunk), -1)
            ans = np.stack([tables[i] for i in chunk])
            if perm != tuple(range(len(perm))):  # the answers in the parts' attribute order
                ans = ans.reshape((len(chunk),) + sizes_r).transpose((0,) + tuple(p + 1 for p in perm))
                ans = ans.reshape(len(chunk), -1)
            out[chunk] = np.abs(ans - prod).sum(axis=1)
    return out
