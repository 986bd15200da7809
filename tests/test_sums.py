"""sum_out (BLAS sums over axes) against numpy's own reduction."""

import itertools

import numpy as np
import pytest

from privmarg.core.sums import BLAS_SUM_CELLS, sum_out

SHAPES = [(9, 16, 7, 5, 4, 2), (5, 32, 3, 42), (2, 3, 2, 700), (700, 2, 3), (6, 2, 2), (4096,), (3, 5000)]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_set_of_axes_matches_numpy(shape):
    rng = np.random.default_rng(len(shape))
    a = rng.random(shape) * rng.choice([1e-300, 1.0, 1e6], size=shape)
    for k in range(len(shape) + 1):
        for axes in itertools.combinations(range(len(shape)), k):
            want = a.sum(axis=axes) if axes else a
            got = sum_out(a, axes)
            assert np.shape(got) == np.shape(want), (shape, axes)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=str((shape, axes)))


def test_out_is_written_and_returned():
    a = np.random.default_rng(0).random((40, 3, 50, 2))
    out = np.full((40, 50), -1.0)
    res = sum_out(a, (1, 3), out=out)
    assert res is out
    np.testing.assert_allclose(out, a.sum(axis=(1, 3)), rtol=1e-12)


def test_views_small_tables_and_infinities_take_numpy_path():
    a = np.random.default_rng(1).random((64, 2, 64))
    view = a[:, :, ::2]  # not contiguous
    np.testing.assert_allclose(sum_out(view, (1,)), view.sum(axis=1), rtol=1e-12)
    small = a[:2, :, :3].copy()
    assert small.size < BLAS_SUM_CELLS
    np.testing.assert_array_equal(sum_out(small, (0, 2)), small.sum(axis=(0, 2)))
    b = np.zeros((100, 50, 2))
    b[3, 4, 1] = np.inf
    got = sum_out(b, (2,))
    assert got[3, 4] == np.inf and np.isfinite(np.delete(got.ravel(), 3 * 50 + 4)).all()


def test_an_infinity_before_a_short_kept_run_stays_in_its_own_cell():
    # the stacked-identity product would turn inf * 0 into NaN across the row: numpy's sum instead
    a = np.ones((64, 32, 2))
    a[5, 7, 1] = np.inf
    got = sum_out(a, (1,))
    assert got[5, 1] == np.inf and got[5, 0] == 32.0
    assert np.isfinite(np.delete(got.ravel(), 5 * 2 + 1)).all()
    np.testing.assert_array_equal(got, a.sum(axis=1))


def test_long_summed_runs_before_a_short_kept_one_keep_the_identity_cache_small():
    """A summed run of n cells before a kept run of k ≤ SHORT_KEPT: stacked identities only while
    they hold at most EYE_CELLS cells (they are cached for the process); longer runs take one
    vector-matrix product per leading row. Same sums either way."""
    from privmarg.core import sums

    sums._EYES.clear()
    rng = np.random.default_rng(3)
    for shape in [(3, 9000, 8), (2, 40000, 2), (5, 600, 4)]:
        a = rng.random(shape)
        np.testing.assert_allclose(sum_out(a, (1,)), a.sum(axis=1), rtol=1e-12)
    assert all(n * k * k <= sums.EYE_CELLS for n, k, _ in sums._EYES)
    assert (600, 4, "d") in sums._EYES
