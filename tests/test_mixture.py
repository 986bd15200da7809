"""ProductMixture: the model behind relaxed projection and GEM (exact marginals, samples that follow
them, exact conditionals, stratified rounding, structural zeros)."""

import numpy as np
import pytest

from privmarg.core import Domain, StructuralZero
from privmarg.generate.mixture import ProductMixture

DOM = Domain(["a", "b", "c"], [3, 2, 4])


def _mixture(rows=5, seed=0, **kw):
    rng = np.random.default_rng(seed)
    blocks = [rng.dirichlet(np.ones(k), rows) for k in DOM.shape]
    return ProductMixture(DOM, np.hstack(blocks), total=100.0, **kw), blocks


def test_project_is_the_brute_force_mixture_marginal():
    m, blocks = _mixture()
    joint = np.zeros(DOM.shape)
    for n in range(5):  # the full joint, row by row
        joint += np.einsum("i,j,k->ijk", blocks[0][n], blocks[1][n], blocks[2][n]) / 5
    joint *= 100.0
    want = {("a",): joint.sum((1, 2)), ("c", "a"): joint.sum(1).T, ("b", "c"): joint.sum(0), ("a", "b", "c"): joint}
    for r, w in want.items():
        assert np.allclose(m.project(r), w.ravel())


def test_samples_follow_the_model_and_stratified_rounding_uses_every_row_equally():
    m, _ = _mixture()
    codes = m.sample(200_000, np.random.default_rng(1))
    got = np.bincount(np.ravel_multi_index(codes[:, [0, 2]].T, (3, 4)), minlength=12) / len(codes)
    assert np.abs(got - m.project(("a", "c")) / 100.0).max() < 0.01
    s, _ = _mixture(stratified=True)
    idx = s._pick(23, np.random.default_rng(0), None)
    assert sorted(np.bincount(idx, minlength=5)) == [4, 4, 5, 5, 5]  # 23 = 4·5 + 3 distinct extra rows


def test_conditional_samples_are_exact_and_zeros_hold():
    zero = StructuralZero.from_cells(DOM, ("b", "c"), [(0, 3)])
    m, _ = _mixture(zeros=[zero])
    codes = m.sample_conditional(100_000, np.random.default_rng(2), {"a": 1})
    assert (codes[:, 0] == 1).all() and zero.violations(codes, DOM) == 0
    joint = m.project(("a", "b")).reshape(3, 2)[1]
    got = np.bincount(codes[:, 1], minlength=2) / len(codes)
    # b's conditional moves only through the zero's repair of (b=0, c=3): compare without those rows
    assert abs(got[0] - joint[0] / joint.sum()) < 0.1
    assert zero.violations(m.sample(10_000, np.random.default_rng(3)), DOM) == 0
    with pytest.raises(ValueError, match="probability zero"):
        ProductMixture(DOM, np.hstack([np.tile([1.0, 0, 0], (2, 1)), np.full((2, 2), .5), np.full((2, 4), .25)]),
                       10.0).sample_conditional(5, np.random.default_rng(0), {"a": 2})
