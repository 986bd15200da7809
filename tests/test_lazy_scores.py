"""Scores asked for only where they can win: the lazy exponential mechanism picks exactly what scoring
every option would, the models' drift bounds every marginal's move (brute force on tiny domains), and
AIM's and JAM's rounds select, measure and release the same as with every candidate scored."""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest

import privmarg.presets as presets
from privmarg import AIM, JAM, Dataset, Domain, Measurement, StructuralZero, estimate
from privmarg.generate.pgm.drift import drift, key_marginals
from privmarg.privacy import Accountant, exponential_mechanism_fitting, exponential_mechanism_lazy
from privmarg.select import adaptive
from privmarg.select.lazy_scores import ErrorBounds, ScoreTerms


def marginal_drift(before, after, before_marginals, after_marginals, attrs=None) -> float:
    """Counts by which the marginal on ``attrs`` (None: on every attribute) can have moved from
    ``before`` to ``after`` by :func:`drift`; ``inf`` where not known."""
    d = drift(before, after, before_marginals, after_marginals)
    if d is None:
        return float("inf")
    where = {a: i for i, a in enumerate(after.domain.attrs)}
    pos = [where[a] for a in (after.domain.attrs if attrs is None else attrs)]
    return float(d.bound(np.array([pos]))[0])


def _case(seed, n=60):
    rng = np.random.default_rng(seed)
    scores = rng.normal(0, 30, n)
    scores[rng.random(n) < 0.1] = -np.inf
    fitting = rng.random(n) < 0.7
    fitting[0] = True
    return rng, scores, fitting


def _both(scores, upper, fitting, eps, seed, first=16):
    """(pick of the full walk, pick of the lazy one, scores asked for, the two rngs afterwards)."""
    asked = []

    def exact(idx):
        asked.extend(idx.tolist())
        return scores[idx]

    r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
    a1, a2 = Accountant(10.0), Accountant(10.0)
    fits = lambda i: bool(fitting[i])  # noqa: E731
    full = exponential_mechanism_fitting(a1, scores, eps, 1.0, r1, fits)
    lazy = exponential_mechanism_lazy(a2, upper, exact, eps, 1.0, r2, fits, first=first)
    assert a1.rho_spent == a2.rho_spent
    return full, lazy, asked, r1, r2


@pytest.mark.parametrize("seed", range(40))
def test_lazy_pick_is_the_full_walks_pick(seed):
    rng, scores, fitting = _case(seed)
    slack = rng.exponential(5.0, scores.size) * (rng.random(scores.size) < 0.8)
    upper = np.where(np.isfinite(scores), scores + slack, rng.normal(0, 30, scores.size))
    upper[rng.random(scores.size) < 0.1] = np.inf  # no bound
    eps = float(rng.choice([0.05, 0.3, 1.0]))
    full, lazy, asked, r1, r2 = _both(scores, upper, fitting, eps, seed, first=int(rng.integers(1, 20)))
    assert full == lazy
    assert len(asked) == len(set(asked))  # each score asked for once
    assert r1.random() == r2.random()  # the same draws: later mechanisms see the same stream


def test_tight_bounds_ask_for_few_scores():
    rng = np.random.default_rng(0)
    scores = rng.normal(0, 200, 2000)  # a spread far wider than the Gumbel noise
    full, lazy, asked, _, _ = _both(scores, scores + 1.0, np.ones(scores.size, bool), 1.0, 0)
    assert full == lazy
    assert len(asked) < 100
    # no bounds at all: every score asked for, once
    full, lazy, asked, _, _ = _both(scores, np.full(scores.size, np.inf), np.ones(scores.size, bool), 1.0, 0)
    assert full == lazy and sorted(asked) == list(range(scores.size))


def test_lazy_pick_is_exact_where_scores_and_noise_are_alike():
    """Scores spread about as wide as the Gumbel noise, half the bounds tight, one score asked for
    at a time: any slack in the stopping rule (a margin of even 0.1) changes picks here."""
    for seed in range(3000):
        rng = np.random.default_rng(seed)
        scores = rng.normal(0, 4, 40)
        fitting = rng.random(40) < 0.7
        fitting[0] = True
        upper = scores + rng.exponential(1.0, 40) * (rng.random(40) < 0.5)
        full, lazy, _, _, _ = _both(scores, upper, fitting, 1.0, seed, first=1)
        assert full == lazy, seed


def test_a_wrong_bound_on_a_score_asked_for_voids_the_pruning():
    """Every bound too low, each by a different amount: a score asked for above its bound is
    caught, and every score left is then asked for (the pick stays exact). A wrong bound on a score
    never asked for cannot be caught: the bounds must be valid."""
    for seed in range(1000):
        rng = np.random.default_rng(seed)
        scores = rng.normal(0, 30, 60)
        fitting = rng.random(60) < 0.7
        fitting[0] = True
        full, lazy, _, _, _ = _both(scores, scores - rng.uniform(0, 40, 60), fitting, 1.0, seed, first=1)
        assert full == lazy, seed
    scores, upper = np.array([10.0, 100.0]), np.array([10.0, 0.0])
    full, lazy, asked, _, _ = _both(scores, upper, np.ones(2, bool), 1.0, 0, first=1)
    assert (full, lazy, asked) == (1, 0, [0])  # the documented limit, not a feature


def test_lazy_pick_with_zero_epsilon_and_with_nothing_fitting():
    rng, scores, fitting = _case(3)
    with np.errstate(all="raise"):
        full, lazy, _, _, _ = _both(scores, scores + 1.0, fitting, 0.0, 3)  # −inf scores at ε = 0
    assert full == lazy
    acc = Accountant(1.0)
    pick = exponential_mechanism_lazy(acc, np.ones(5), lambda idx: np.ones(len(idx)), 1.0, 1.0,
                                      np.random.default_rng(0), lambda i: False)
    assert pick is None and acc.rho_spent == 0.0


def test_score_terms_bounds():
    terms = ScoreTerms(["a", "b", "c"], [0, 1, 1], [-1.0, -2.0, 5.0], [1.0, 2.0, 0.0], 1.0)
    assert terms.scores(np.array([3.0, 4.0])).tolist() == [2.0, 6.0, 5.0]
    assert terms.upper(np.array([np.inf, 10.0])).tolist() == [np.inf, 18.0, 5.0]
    with pytest.raises(ValueError):
        ScoreTerms(["a"], [0], [0.0], [-1.0], 1.0)


# ---------------------------------------------------------------------------------------- drift
def _models(seed, total=1000.0):
    """A model fitted to two noisy marginals, and one refitted from it with a third added."""
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d"], [2, 3, 2, 3])
    p = rng.dirichlet(np.ones(dom.size(dom.attrs)) * 0.5).reshape(dom.shape)

    def marg(attrs):
        axes = tuple(i for i, a in enumerate(dom.attrs) if a not in attrs)
        return p.sum(axis=axes).ravel() * total + rng.normal(0, 20, dom.size(attrs))

    ms = [Measurement(("a", "b"), marg(("a", "b")), 20.0), Measurement(("c",), marg(("c",)), 20.0)]
    before = estimate(dom, ms, total=total, iters=int(rng.integers(3, 40)))
    new = tuple(rng.choice([("b", "c"), ("c", "d"), ("a", "d"), ("a", "b")]))
    ms2 = ms + [Measurement(new, marg(new), 20.0)]
    after = estimate(dom, ms2, total=total, iters=int(rng.integers(1, 40)), warm=before.potentials)
    return dom, before, after


def _joint(model, dom):
    return model.project(tuple(dom.attrs)) / model.total


@pytest.mark.parametrize("seed", range(12))
def test_drift_bounds_every_marginal(seed):
    dom, before, after = _models(seed)
    known = {r: before.project(r) / before.total for r in after.potentials}
    bound = marginal_drift(before, after, known, key_marginals(after))
    # the divergence it rests on, brute force over the joint
    P, Q = _joint(after, dom), _joint(before, dom)
    J = float(np.sum((P - Q) * (np.log(P) - np.log(Q))))
    assert bound >= after.total * np.sqrt(J) - 1e-6 * after.total
    moves = [np.abs(after.project(A) - before.project(A)).sum()
             for k in range(1, 5) for A in itertools.combinations(dom.attrs, k)]
    assert max(moves) <= bound
    # and it is close: the joint itself moves by nearly as much on these tiny domains
    assert bound <= 1.6 * max(moves) + 1.0


def test_drift_bound_counts_a_change_in_the_total():
    dom, before, after = _models(4)
    before.total = 900.0  # the same distribution standing for fewer records (add/remove: N moves)
    known = {r: before.project(r) / before.total for r in after.potentials}
    for k in range(1, 5):
        for A in itertools.combinations(dom.attrs, k):
            move = np.abs(after.project(A) - before.project(A)).sum()
            assert move <= marginal_drift(before, after, known, key_marginals(after), A)


@pytest.mark.parametrize("amp", [1.0, 10.0, 100.0])
def test_drift_bound_holds_where_potentials_shift_without_moving(amp):
    """Potentials shifted along directions that leave the distribution as it is (a constant per
    clique, +g on one clique and −g on its neighbour over their shared attribute) multiply the
    marginals' rounding in J; the bound must still hold. Float32 models get no bound at all."""
    rng = np.random.default_rng(1)
    dom = Domain(list("abcdef"), [8, 9, 7, 8, 9, 10])
    total = 1e6
    keys = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f")]
    ms = [Measurement(r, rng.random(dom.size(r)) * total / dom.size(r) * 2, 1.0) for r in keys]
    before = estimate(dom, ms, total=total, iters=20)
    for _ in range(5):
        pot = {r: v.copy() + rng.normal(0, amp) for r, v in before.potentials.items()}
        pot[("c", "d")] = pot[("c", "d")] + rng.normal(0, 2e-3, pot[("c", "d")].shape)  # a real, small move
        for r1, r2, x in [(("a", "b"), ("b", "c"), "b"), (("c", "d"), ("d", "e"), "d")]:
            g = rng.normal(0, amp, dom[x])
            s1 = [dom[a] if a == x else 1 for a in r1]
            s2 = [dom[a] if a == x else 1 for a in r2]
            pot[r1] = (pot[r1].reshape(dom.sizes(r1)) + g.reshape(s1)).ravel()
            pot[r2] = (pot[r2].reshape(dom.sizes(r2)) - g.reshape(s2)).ravel()
        after = estimate(dom, ms, total=total, iters=0, warm=pot)
        bound = marginal_drift(before, after, key_marginals(before), key_marginals(after))
        move = np.abs(after.project(tuple(dom.attrs)) - before.project(tuple(dom.attrs))).sum()
        assert move <= bound < 2 * total
        # the same models in float32: their marginals' rounding is beyond any useful allowance
        b32 = estimate(dom, ms, total=total, iters=0, warm=before.potentials, dtype="float32")
        a32 = estimate(dom, ms, total=total, iters=0, warm=pot, dtype="float32")
        assert key_marginals(a32) is None
        assert marginal_drift(b32, a32, key_marginals(before), key_marginals(after)) == np.inf


def test_no_bound_from_a_fit_whose_potentials_ran_off():
    """A structural zero pins an attribute and the loss is flat: mirror descent's step keeps growing
    and the potentials run off until the marginals no longer sum to N. No bound may rest on such a
    model (its marginals move far more than J says)."""
    from privmarg import StructuralZero

    dom = Domain(["x0", "x1", "x2", "x3"], [2, 3, 2, 3])
    zeros = [StructuralZero(("x0",), [False, True])]  # x0 can only be 0
    m1 = Measurement(("x0",), np.array([513.815, 486.059]), 1.0, weight=0.5)
    before = estimate(dom, [m1], iters=52, zeros=zeros, method="md")
    m2 = Measurement(("x2",), np.array([504.119, 498.941]), 1.0)
    after = estimate(dom, [m1, m2], iters=38, zeros=zeros, method="md", warm=before.potentials, step=before.step_size)
    broken = max(abs(float(t.sum()) - after.total) for t in after.marginals) > 1e-6 * after.total or \
        max(float(np.abs(v).max()) for v in after.potentials.values()) > 1e9
    assert broken  # the case this test is about
    known = {r: before.project(r) / before.total for r in after.potentials}
    assert key_marginals(after) is None
    assert marginal_drift(before, after, known, {r: after.project(r) / after.total for r in after.potentials}) == np.inf
    # and the cap on errors grows with what the model's tables hold
    assert adaptive.model_l1(after) >= max(float(t.sum()) for t in after.marginals)


def test_drift_is_unbounded_where_the_models_do_not_nest():
    dom, before, after = _models(1)
    known = {r: after.project(r) / after.total for r in before.potentials}
    # the other way round: `after` holds a potential `before` lacks
    if set(after.potentials) != set(before.potentials):
        assert marginal_drift(after, before, known, key_marginals(before)) == np.inf
    # a marginal missing
    assert marginal_drift(before, after, {}, key_marginals(after)) == np.inf
    assert key_marginals(object()) is None


def test_error_bounds_grow_by_the_drift_and_forget_on_an_unknown_move():
    dom, before, after = _models(2)
    cands = [("a",), ("b",), ("c",), ("a", "d")]
    b = ErrorBounds(dom, cands)
    b.moved(None, before, None, None)
    b.record(np.array([0, 1, 3]), np.array([5.0, 7.0, 9.0]))
    b.moved(before, after, None, None)
    known = key_marginals(before) | {r: before.project(r) / before.total
                                     for r in after.potentials if r not in before.potentials}
    d = [marginal_drift(before, after, known, key_marginals(after), r) for r in cands]
    assert b.upper(np.arange(4)).tolist() == pytest.approx([5.0 + d[0], 7.0 + d[1], np.inf, 9.0 + d[3]])
    # no error exceeds the two tables' totals: the cap bounds the unknown and the stale alike
    assert b.upper(np.arange(4), cap=6.0).tolist() == pytest.approx([min(5.0 + d[0], 6.0), 6.0, 6.0, 6.0])
    b.record(np.array([1]), np.array([3.0]))
    assert b.upper(np.array([1]))[0] == 3.0
    b.moved(after, object(), None, None)  # not a graphical model: nothing known any more
    assert np.isinf(b.upper(np.arange(4))).all()


def test_a_part_the_refit_did_not_touch_keeps_a_tight_bound():
    """Two independent parts; the refit adds a measurement to one: marginals of the other part get
    a bound of about the rounding allowance alone, and the brute-force moves respect every bound."""
    rng = np.random.default_rng(5)
    dom = Domain(["a", "b", "c", "d"], [3, 2, 3, 2])
    total = 1000.0

    def noisy(attrs):
        return rng.dirichlet(np.ones(dom.size(attrs))) * total

    ms = [Measurement(("a", "b"), noisy(("a", "b")), 10.0), Measurement(("c",), noisy(("c",)), 10.0),
          Measurement(("d",), noisy(("d",)), 10.0)]
    before = estimate(dom, ms, total=total, iters=3000, tol=1e-12)
    after = estimate(dom, ms + [Measurement(("c", "d"), noisy(("c", "d")), 10.0)], total=total, iters=30,
                     warm=before.potentials)
    known = {r: before.project(r) / total for r in after.potentials}
    mk = key_marginals(after)
    for k in range(1, 5):
        for A in itertools.combinations(dom.attrs, k):
            move = np.abs(after.project(A) - before.project(A)).sum()
            assert move <= marginal_drift(before, after, known, mk, A)
    untouched = marginal_drift(before, after, known, mk, ("a", "b"))
    touched = marginal_drift(before, after, known, mk, ("c", "d"))
    assert untouched < 0.01 * touched and untouched < 1.0


# ------------------------------------------------------------------------------- the rounds
def _full_scoring(monkeypatch):
    monkeypatch.setattr(ErrorBounds, "upper", lambda self, at, cap=np.inf: np.full(len(at), np.inf))


def _counting(monkeypatch):
    asked = []
    real = adaptive.candidate_errors

    def count(state, cands):
        asked.append(len(cands))
        return real(state, cands)

    monkeypatch.setattr(adaptive, "candidate_errors", count)
    return asked


def _table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d", "e", "f"], [4, 3, 5, 2, 6, 3])
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = (2 * b + rng.integers(0, 2, n)) % 5
    d = (c > 2).astype(int) ^ (rng.random(n) < 0.1)
    e = np.where(rng.random(n) < 0.9, a, 5)
    f = (d + rng.integers(0, 2, n)) % 3
    return Dataset(np.column_stack([a, b, c, d, e, f]), dom)


def _release(mech):
    return ([(e.get("source"), tuple(e["selected"])) for e in mech.log_],
            [m.y for m in mech.measurements_ if m.y is not None])


def _every_score(state, cands, at, terms, plan, fits, bounds, what):
    """The rounds' selection before scores were asked for lazily: every score, then the walk."""
    scores = terms.scores(adaptive.candidate_errors(state, cands))
    return state.session.select_fitting(scores, plan.epsilon, terms.sensitivity, fits, what=what)


@pytest.mark.parametrize("method", ["aim", "aim-small-models", "jam", "jam-float64", "jam-float32-model"])
def test_rounds_release_what_scoring_every_candidate_releases(method, monkeypatch):
    """Lazy scoring against every score computed (the old path) and against bounds switched off;
    AIM with a model cap so small that the round's candidates are a strict subset (their positions
    matter); JAM's loop as the preset has it (fitted on float32 tables, its model recomputed in
    float64), fitted in float64, and left in float32, where no drift bound is used."""
    data, public = _table(3000, 0), _table(1500, 1)
    if method == "jam-float32-model":
        monkeypatch.setitem(presets.JAM_LOOP, "model_dtype", None)

    def fit():
        if method.startswith("jam"):
            dtype = "float64" if method == "jam-float64" else "float32"
            mech = JAM(0.1, 1e-9, seed=3, rounds=20, refit_dtype=dtype).fit(data, public=public)
            loop_dtype = mech.selection_.model.marginals[0].dtype
            assert loop_dtype == (np.float32 if method == "jam-float32-model" else np.float64)
            return mech
        if method == "aim-small-models":
            return AIM(1.0, 1e-9, seed=0, neighbour="replace_one", max_model_size=0.003).fit(data)
        return AIM(0.3, 1e-9, seed=3, neighbour="replace_one").fit(data)

    with monkeypatch.context() as m:
        asked_lazy = _counting(m)
        lazy = fit()
    with monkeypatch.context() as m:
        _full_scoring(m)
        asked_full = _counting(m)
        unbounded = fit()
    with monkeypatch.context() as m:
        m.setattr(adaptive, "pick_lazily", _every_score)
        full = fit()
    if method == "aim-small-models":  # the round's options and weights are its candidates'
        seen = []

        def checked(self, state, cands, plan):
            terms = real_terms(self, state, cands, plan)
            assert [o.clique for o in terms.options] == list(cands)
            assert terms.slope.tolist() == [state.weights[r] for r in cands]
            seen.append(len(cands) < len(state.candidates))
            return terms

        from privmarg.select.aim import AIMSelector
        real_terms = AIMSelector.score_terms
        with monkeypatch.context() as m:
            m.setattr(AIMSelector, "score_terms", checked)
            fit()
        assert any(seen)
    for other in (unbounded, full):
        (sel_l, y_l), (sel_f, y_f) = _release(lazy), _release(other)
        assert sel_l == sel_f
        assert len(y_l) == len(y_f) and all(np.array_equal(a, b) for a, b in zip(y_l, y_f))
        assert np.array_equal(lazy.sample_codes(seed=0), other.sample_codes(seed=0))
    if method == "aim-small-models":
        assert min(e["n_candidates"] for e in lazy.log_) < 41  # of the 41 in the 3-way closure of 6 columns
    if method == "jam-float32-model":
        assert sum(asked_lazy) == sum(asked_full)  # no bound rests on float32 tables
    elif method != "aim-small-models":
        assert sum(asked_lazy) < 0.8 * sum(asked_full)  # the bounds spared some of the scoring


@pytest.mark.parametrize("zeros", [False, True])
def test_jam_loop_models_move_within_their_bounds(zeros, monkeypatch):
    """JAM's loop as the preset has it (float32 fits, float64 tables made from products of the
    potentials' exponentials: exp space forced on this small domain), warm refits, superseded public
    answers, with and without a structural zero: every candidate's marginal moves between two
    successive loop models by at most what :meth:`ErrorBounds.moved` adds to its bound."""
    monkeypatch.setattr(importlib.import_module("privmarg.generate.pgm.estimate"), "DENSE_CLIQUE_CELLS", 20)
    data, public = _table(3000, 0), _table(1500, 1)
    if zeros:  # (a = 3, b = 0) never happens
        codes = data.codes.copy()
        codes[(codes[:, 0] == 3) & (codes[:, 1] == 0), 1] = 1
        data = Dataset(codes, data.domain)
    zero = [StructuralZero.from_cells(data.domain, ("a", "b"), [[3, 0]])] if zeros else None
    checked = []
    real = ErrorBounds.moved

    def moved(self, before, after, chosen, chosen_before):
        kept, move = ~np.isnan(self.errors), self.move.copy()
        real(self, before, after, chosen, chosen_before)
        if before is None or np.isnan(self.errors).all():
            return
        assert after.marginals[0].dtype == np.float64
        added = self.move - move
        for i in np.flatnonzero(kept):
            r = self.candidates[i]
            shift = np.abs(after.project(r, cache=False) - before.project(r, cache=False)).sum()
            assert shift <= added[i], (r, shift, added[i])
            checked.append(added[i] > 0)

    monkeypatch.setattr(ErrorBounds, "moved", moved)
    JAM(0.3, 1e-9, seed=2, rounds=15).fit(data, public=public, zeros=zero)
    assert len(checked) > 100 and all(checked)


def test_no_error_exceeds_the_cap_and_some_exceed_n():
    """The cap is N plus the model's total: errors of a model far from the data pass N, and none
    passes the cap (a cap of N alone would prune a score that can win)."""
    from types import SimpleNamespace

    from privmarg.data.source import MemorySource

    data = _table(500, 0)
    far = _table(500, 7)  # another table's 1-way marginals only: a poor model of `data`
    model = estimate(data.domain, [Measurement((a,), far.project((a,)), 1.0) for a in data.domain.attrs],
                     total=500.0, iters=200)
    source = MemorySource(data)
    cands = [("a", "b", "c"), ("b", "e"), ("d", "e", "f"), ("a", "e"), ("c", "f")]
    errors = [np.abs(y - model.project(r)).sum() for r, y in zip(cands, source.marginals(cands))]
    state = SimpleNamespace(model=model, session=SimpleNamespace(source=source))
    cap = adaptive.error_cap(state)
    assert max(errors) <= cap
    assert max(errors) > source.count()
    state.session.source = SimpleNamespace(count=source.count)  # a source that does not say it counts rows
    assert adaptive.error_cap(state) == np.inf


def test_only_sources_that_count_rows_cap_the_errors():
    """The cap ‖y‖₁ ≤ N holds for sources that count each row once; a precomputed source may hold
    any numbers, so its errors are not capped."""
    from privmarg.data.source import MappedSource, MemorySource, PrecomputedSource

    data = _table(200, 0)
    mem = MemorySource(data)
    assert mem.counts_rows
    assert all(np.abs(y).sum() <= mem.count() for y in mem.marginals([("a",), ("a", "b"), ("c", "d", "e")]))
    pre = PrecomputedSource.from_source(mem, [("a", "b")])
    assert not getattr(pre, "counts_rows", False)
    merged = Domain(["a", "b", "c", "d", "e", "f"], [2, 3, 5, 2, 6, 3])
    assert MappedSource(mem, merged, {"a": np.array([0, 0, 1, 1])}).counts_rows
    assert not MappedSource(pre, merged, {"a": np.array([0, 0, 1, 1])}).counts_rows
