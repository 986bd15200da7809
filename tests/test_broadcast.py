"""apply_broadcast: numpy's broadcast ufuncs and copies, bit for bit, whatever path it takes."""

import itertools

import numpy as np
import pytest

from privmarg.core.broadcast import EXPAND_RUN, LONG_RUN, PEEL_RUN, apply_broadcast

SHAPES = [(9, 16, 7, 5, 32, 2), (32, 9, 7, 6, 2), (16, 5, 32, 42), (64, 2, 33, 3), (4, 3, 2)]


def _patterns(shape):
    for keep in itertools.product((True, False), repeat=len(shape)):
        yield tuple(n if k else 1 for n, k in zip(shape, keep))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", [np.add, np.multiply, np.subtract, None])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_broadcast_pattern_matches_numpy(shape, op, dtype):
    rng = np.random.default_rng(0)
    a = rng.normal(size=shape).astype(dtype)
    for bshape in _patterns(shape):
        b = rng.normal(size=bshape).astype(dtype)
        b.flat[:: max(1, b.size // 3)] = [np.inf, -np.inf, np.nan, 0.0][: len(b.flat[:: max(1, b.size // 3)])]
        want = np.broadcast_to(b, shape).copy() if op is None else op(a, b)
        out = np.empty(shape, dtype=dtype)
        got = apply_broadcast(op, None if op is None else a, b, out)
        assert got is out
        assert np.array_equal(got, want, equal_nan=True), bshape


def test_in_place_fewer_axes_and_float32():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(300, 40, 2)).astype(np.float32)
    b = rng.normal(size=(40, 1)).astype(np.float32)  # fewer axes: numpy's rules pad on the left
    want = a * b
    apply_broadcast(np.multiply, a, b, a)
    assert a.dtype == np.float32 and np.array_equal(a, want)


def test_peels_only_a_short_last_run_behind_a_long_one():
    # the property the speed rests on: the peeled path is taken for (K, J≥LONG_RUN, L≤PEEL_RUN)
    import privmarg.core.broadcast as bc

    calls = []
    real = np.add

    def counting(*args, **kw):
        calls.append(args[0].shape)
        return real(*args, **kw)

    a = np.ones((100, LONG_RUN, PEEL_RUN))
    apply_broadcast(counting, a, np.ones((100, 1, PEEL_RUN)), a)
    assert calls == [(100, LONG_RUN)] * PEEL_RUN
    calls.clear()
    a = np.ones((100, LONG_RUN, PEEL_RUN + 1))
    bc.apply_broadcast(counting, a, np.ones((100, 1, PEEL_RUN + 1)), a)
    assert calls == [a.shape]
    assert np.array_equal(a, np.full(a.shape, 2.0))


def _recording(calls):
    real = np.multiply

    def op(*args, **kw):
        calls.append(kw["out"].shape)
        return real(*args, **kw)

    return op


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_expands_the_small_operand_into_a_long_inner_loop(dtype):
    # belief propagation's slow cases: a separator message broadcast along short last axes
    rng = np.random.default_rng(2)
    cases = [((9, 16, 15, 5, 32, 2), (9, 16, 15, 5, 1, 2)),  # last run copied as one wide item
             ((16, 9, 16, 15, 5, 2), (16, 1, 16, 1, 5, 1))]  # a copy a ninth of the table
    for shape, bshape in cases:
        a, b = rng.normal(size=shape).astype(dtype), rng.normal(size=bshape).astype(dtype)
        calls = []
        out = apply_broadcast(_recording(calls), a, b, np.empty_like(a))
        assert len(calls) == 1 and calls[0][-1] >= EXPAND_RUN, (shape, calls)
        assert np.array_equal(out, a * b)
