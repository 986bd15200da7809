"""AIM's memory (issue #18): compact round models, only those a bound needs, and no projection caches."""

from __future__ import annotations

import numpy as np

from privmarg import AIM
from privmarg.generate.pgm import GraphicalModel
from test_mechanisms import correlated_table


def test_compact_model_projects_bit_for_bit():
    data = correlated_table(n=3000)
    mech = AIM(1.0, 1e-6, workload="all-3way", seed=1, iters=60, final_iters=150).fit(data)
    model = mech.model_
    small = model.compact()
    assert small._marginals is None and not small._cache and not hasattr(small, "potentials")
    for r in list(mech.weights_)[:25]:
        assert np.array_equal(small.project(r), model.project(r))
        assert np.array_equal(model.project(r, cache=False), model.project(r))


def test_only_the_round_models_a_bound_needs_are_kept():
    data = correlated_table(n=3000)
    mech = AIM(1.0, 1e-6, workload="all-3way", seed=2, iters=60, final_iters=150).fit(data)
    measured = [set(m.attrs) for m in mech.measurements_]
    unsupported = [r for r in mech.weights_ if not any(set(r) <= m for m in measured)]
    assert unsupported  # the test needs both kinds
    needed = {mech.last_candidate_round_[r] for r in unsupported}
    assert set(mech.round_models_) == needed
    assert mech.rounds_ > len(needed)  # something was dropped
    for m in mech.round_models_.values():
        assert isinstance(m, GraphicalModel) and not m._cache
    bounds = mech.error_bounds()
    assert {b.supported for b in bounds} >= {False}
    for m in mech.round_models_.values():
        assert not m._cache  # bounds query the kept models without caching
    assert all(0 < b.l1_bound <= 2 for b in bounds)
