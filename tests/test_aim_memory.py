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


def test_round_models_kept_are_the_latest_within_a_quarter_of_the_size_cap():
    data = correlated_table(n=3000)
    # rounds given: the many small rounds of the default plan (the budget rule would plan fewer)
    mech = AIM(1.0, 1e-6, workload="all-3way", seed=2, iters=60, final_iters=150, max_model_size=0.02,
               rounds=80).fit(data)
    kept = sorted(mech.round_models_)
    assert kept[-1] == mech.rounds_  # the last round's model is always kept
    assert kept == list(range(kept[0], mech.rounds_ + 1))  # newest first, no gaps
    assert sum(mech.round_models_[t].size_mb() for t in kept[:-1]) <= 0.02 / 4
    assert len(kept) < mech.rounds_  # something was dropped
    for m in mech.round_models_.values():
        assert isinstance(m, GraphicalModel) and not m._cache
    bounds = mech.error_bounds()
    assert {b.supported for b in bounds} >= {False}
    for m in mech.round_models_.values():
        assert not m._cache  # bounds query the kept models without caching
    assert all(0 < b.l1_bound <= 2 for b in bounds)


def test_work_cap_lowers_iterations_in_proportion_to_model_size():
    from privmarg import Domain
    from privmarg.core import Measurement
    from privmarg.generate.pgm import PGM
    from privmarg.generate.pgm.junction_tree import model_size_mb

    dom = Domain(["a", "b", "c"], [40, 50, 60])
    rng = np.random.default_rng(0)
    ms = [Measurement(("a", "b"), rng.random(2000) * 10, 1.0), Measurement(("b", "c"), rng.random(3000) * 10, 1.0)]
    size = model_size_mb(dom, [("a", "b"), ("b", "c")])
    work = 40 * size  # a cap of 40 iterations for this model
    capped = PGM(iters=500, tol=0.0, work_mb=work, min_iters=5)
    assert capped.iterations_for(dom, [m.attrs for m in ms]) == 40
    assert PGM(iters=500, tol=0.0, work_mb=work, min_iters=60).iterations_for(dom, [m.attrs for m in ms]) == 60
    assert PGM(iters=30, tol=0.0, work_mb=work).iterations_for(dom, [m.attrs for m in ms]) == 30
    assert PGM(iters=500, tol=0.0).iterations_for(dom, [m.attrs for m in ms]) == 500
    fit = capped.generate(ms, dom, total=50.0)
    assert fit.info.iterations == 40  # tol 0: only the cap stops it
    assert PGM(iters=80, tol=0.0).generate(ms, dom, total=50.0).info.iterations == 80


def test_aim_work_cap_leaves_small_models_alone():
    """Models under 4 MB keep ``iters``: the default and ``work_mb=None`` fit the same release."""
    data = correlated_table(n=3000)
    a = AIM(1.0, 1e-6, workload="all-3way", seed=3, iters=60, final_iters=150).fit(data)
    b = AIM(1.0, 1e-6, workload="all-3way", seed=3, iters=60, final_iters=150, work_mb=None).fit(data)
    assert [m.attrs for m in a.measurements_] == [m.attrs for m in b.measurements_]
    assert np.array_equal(a.sample_codes(500), b.sample_codes(500))


def test_pgm_refuses_a_model_too_large_for_memory_before_fitting(monkeypatch):
    """A junction tree whose fit needs more memory than is available is refused with a clear error,
    before the estimator allocates anything; the same model fits when memory suffices."""
    import pytest

    from privmarg import Domain
    from privmarg.core import Measurement
    from privmarg.generate.pgm import generator as gen_mod
    from privmarg.generate.pgm.junction_tree import model_size_mb

    dom = Domain(["a", "b", "c"], [40, 50, 60])
    ms = [Measurement(("a", "b", "c"), np.ones(40 * 50 * 60), 1.0)]
    need = model_size_mb(dom, [("a", "b", "c")]) * gen_mod.FIT_MEMORY_FACTOR * 2**20
    monkeypatch.setattr("privmarg.memory.available_memory", lambda: int(need) - 1)
    called = []
    monkeypatch.setattr(gen_mod, "estimate", lambda *a, **k: called.append(1))
    with pytest.raises(gen_mod.ModelTooLarge, match=r"junction tree of .* MB .*\(a, b, c\) has 120,000 cells"):
        gen_mod.PGM(iters=5).generate(ms, dom, total=100.0)
    assert not called
    monkeypatch.setattr("privmarg.memory.available_memory", lambda: int(need) + 1)
    gen_mod.PGM(iters=5).generate(ms, dom, total=100.0)
    assert called == [1]


def test_the_loop_model_holds_no_marginals_after_the_final_fit():
    data = correlated_table(n=2000)
    mech = AIM(1.0, 1e-6, workload="all-2way", seed=0, iters=40, final_iters=60).fit(data)
    loop = mech.selection_.model
    assert loop._marginals is None and not loop._cache  # dropped before the final fit
    r = mech.model_.cliques[0]
    assert np.allclose(loop.project(r).sum(), loop.total)  # recomputed from the potentials on demand


def test_cached_private_answers_are_compact_read_only_and_exact():
    """The session caches every scored candidate's exact marginal: whole counts below 2²⁴ as
    float32 (half the memory), anything else as float64; read-only, equal to the source's answers."""
    import numpy as np

    from privmarg.core import Domain
    from privmarg.data import Dataset, MemorySource
    from privmarg.measure import MeasurementSession
    from privmarg.privacy import Accountant

    dom = Domain(("a", "b", "c"), (3, 4, 5))
    src = MemorySource(Dataset(np.random.default_rng(1).integers(0, 3, size=(700, 3)), dom))
    s = MeasurementSession(src, Accountant(1.0), np.random.default_rng(2))
    cliques = [("a", "b"), ("c",), ("b", "a", "c")]
    got = s.answers(cliques)
    for a, want in zip(got, src.marginals(cliques)):
        assert a.dtype == np.float32 and not a.flags.writeable
        np.testing.assert_array_equal(a, want)
    assert s.answers([("a", "b")])[0] is got[0]  # served from the cache

    class Weighted(MemorySource):
        def marginals(self, cliques):
            return [m * 0.5 for m in super().marginals(cliques)]

    w = MeasurementSession(Weighted(src._data), Accountant(1.0), np.random.default_rng(2)).answers([("c",)])[0]
    assert w.dtype == np.float64 and not w.flags.writeable
    np.testing.assert_array_equal(w, src.marginals([("c",)])[0] * 0.5)


def test_aim_refits_keep_their_floors_on_large_models():
    """A 40 MB model (beyond both work caps) gets AIM's floors: 10 iterations a round, 50 at the end;
    a 0.1 MB one the full ``iters`` / ``final_iters``."""
    from privmarg import Domain
    from privmarg.presets import AIM_FINAL_MIN_ITERS, AIM_MIN_ITERS

    big = Domain(["a", "b", "c", "d"], [100, 100, 100, 5])  # the cliques below make one 38 MB table
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("a", "d")]
    mech = AIM(10.0, 1e-9)
    assert mech.selector.loop.iterations_for(big, cliques) == AIM_MIN_ITERS == 10
    assert mech.generator.iterations_for(big, cliques) == AIM_FINAL_MIN_ITERS == 50
    small = Domain(["a", "b"], [10, 10])
    assert mech.selector.loop.iterations_for(small, [("a", "b")]) == mech.iters
    assert mech.generator.iterations_for(small, [("a", "b")]) == mech.final_iters
