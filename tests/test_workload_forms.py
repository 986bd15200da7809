"""Workload strings for wide tables: all-Kway:involving=A,B and all-Kway:within=A,B;C,D (issue #47),
against brute-force filters of itertools.combinations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privmarg.core import Domain, all_kway, parse_workload


def random_domain(rng: np.random.Generator) -> Domain:
    n = int(rng.integers(1, 9))
    names = [f"c{i}" for i in rng.permutation(20)[:n]]  # domain order is not name order
    names[0] = "a col" if n > 1 else names[0]  # a name with a space
    return Domain(names, rng.integers(1, 4, n).tolist())


def pick(rng: np.random.Generator, dom: Domain, lo: int = 1) -> list[str]:
    return [dom.attrs[i] for i in rng.permutation(len(dom))[: int(rng.integers(lo, len(dom) + 1))]]


def brute(dom: Domain, k: int, keep) -> list[tuple[tuple[str, ...], float]]:
    return [(c, 1.0) for c in itertools.combinations(dom.attrs, min(k, len(dom))) if keep(set(c))]


def check_shape(w, dom: Domain) -> None:
    cliques = [c for c, _ in w]
    assert len(set(cliques)) == len(cliques)
    keys = [dom.axes(c) for c in cliques]
    assert all(list(k) == sorted(k) for k in keys) and keys == sorted(keys)
    assert all(wt == 1.0 for _, wt in w)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_involving_is_the_filter(seed, k):
    rng = np.random.default_rng(seed)
    for _ in range(5):
        dom = random_domain(rng)
        cols = pick(rng, dom)
        w = parse_workload(f"all-{k}way:involving={','.join(cols)}", dom)
        assert w == brute(dom, k, lambda c: bool(c & set(cols)))
        check_shape(w, dom)
        # target is involving with one column, as all_kway(target=) always was
        t = cols[0]
        assert parse_workload(f"all-{k}way:target={t}", dom) == parse_workload(f"all-{k}way:involving={t}", dom)
        assert all_kway(dom, k, t) == brute(dom, k, lambda c: t in c)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_within_is_the_filter(seed, k):
    rng = np.random.default_rng(100 + seed)
    for _ in range(5):
        dom = random_domain(rng)
        groups = [pick(rng, dom) for _ in range(int(rng.integers(1, 4)))]
        spec = f"all-{k}way:within={';'.join(','.join(g) for g in groups)}"
        want = brute(dom, k, lambda c: any(c <= set(g) for g in groups))
        if not want:
            with pytest.raises(ValueError, match="no group"):
                parse_workload(spec, dom)
            continue
        w = parse_workload(spec, dom)
        assert w == want
        check_shape(w, dom)


def test_small_cases_and_the_cap():
    dom = Domain(["a", "b", "c", "d"], [2, 2, 2, 2])
    assert [c for c, _ in parse_workload("all-2way:involving=d,a", dom)] == \
        [("a", "b"), ("a", "c"), ("a", "d"), ("b", "d"), ("c", "d")]
    assert [c for c, _ in parse_workload("all-2way:within=c,a,b;b,d;a,b", dom)] == \
        [("a", "b"), ("a", "c"), ("b", "c"), ("b", "d")]
    # K beyond the number of columns is capped, as all-Kway is
    assert parse_workload("all-9way:involving=b,c", dom) == [(("a", "b", "c", "d"), 1.0)]
    assert parse_workload("all-9way:within=a,b,c,d", dom) == [(("a", "b", "c", "d"), 1.0)]
    # a group smaller than K contributes nothing
    assert parse_workload("all-3way:within=a,b;b,c,d", dom) == [(("b", "c", "d"), 1.0)]


def test_wide_involving_is_enumerated_not_filtered():
    dom = Domain([f"x{i}" for i in range(600)], [2] * 600)
    w = parse_workload("all-3way:involving=x300", dom)
    assert len(w) == math.comb(599, 2)
    assert w[0][0] == ("x0", "x1", "x300") and w[-1][0] == ("x300", "x598", "x599")
    assert len(parse_workload("all-3way:involving=x0,x599", dom)) == 2 * math.comb(599, 2) - 598


@pytest.mark.parametrize("spec, err, words", [
    ("all-2way:involving=a,zz", KeyError, "zz"),
    ("all-2way:involving=a, b", KeyError, "' b'"),
    ("all-2way:within=a,b;c,zz", KeyError, "zz"),
    ("all-2way:target=zz", KeyError, "zz"),
    ("all-2way:involving=", ValueError, "empty"),
    ("all-2way:involving=a,,b", ValueError, "empty"),
    ("all-2way:within=", ValueError, "empty"),
    ("all-2way:within=a,b;", ValueError, "empty"),
    ("all-2way:within=a,b;;c,d", ValueError, "empty"),
    ("all-2way:target=", ValueError, "target"),
    ("all-2way:involving=a,b,a", ValueError, "repeated"),
    ("all-2way:within=a,b;c,d,c", ValueError, "repeated"),
    ("all-3way:within=a,b;c,d", ValueError, "no group"),
    ("all-2way:foo=a", ValueError, "unknown key 'foo'"),
    ("all-0way:involving=a", ValueError, "at least 1"),
    ("all-2way:involving", ValueError, "involving=A,B"),
    ("nonsense", ValueError, "within=A,B"),
])
def test_bad_forms(spec, err, words):
    dom = Domain(["a", "b", "c", "d"], [2, 2, 2, 2])
    with pytest.raises(err) as e:
        parse_workload(spec, dom)
    assert words in str(e.value)
