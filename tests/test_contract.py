"""The contract every registered method keeps: presets and every selector × generator pair.

Exact spend under both neighbour relations, recomputable ledger, seeded reproducibility, the same
output from precomputed marginals as from the table, structural zeros held, and no second fit
hiding the first one's spending. Parameters are cut down for speed; the plumbing is the real one.
"""

from __future__ import annotations

import numpy as np
import pytest

from privmarg import PGM, Dataset, Domain, PrecomputedSource, StructuralZero, Synthesizer, registry
from privmarg.data import MemorySource
from privmarg.generate.gum import GUM
from privmarg.privacy import NEIGHBOURS, recompute_rho

HAS_TORCH = True
try:  # noqa: SIM105
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - torch is a test dependency, but keep the failure readable
    HAS_TORCH = False

HAS_DEEP = True
try:  # noqa: SIM105
    import dp_accounting  # noqa: F401
    import opacus  # noqa: F401
except ImportError:  # pragma: no cover - the deep extra
    HAS_DEEP = False

EPS, DELTA = 1.0, 1e-6
FAST_PGD = dict(n_particles=300, epochs=2, proj_iters=10, proj_num_projections=10)
FAST_PRESET = {
    "aim": dict(workload="all-2way", iters=30, final_iters=30),
    "mst": dict(iters=50, final_iters=50),
    "mwem": dict(workload="all-2way", iters=50),
    "independent": dict(iters=50),
    "privpgd": FAST_PGD,
    "jam": dict(workload="all-2way", rounds=4, iters=20, final_iters=30),
    "privbayes": {},
    "privsyn": dict(generator=GUM(iters=8, consistency_iters=30)),
    "gaussian": dict(workload="all-2way", generator=PGM(iters=50)),
    "rap": dict(rounds=2, top_k=5, n_prime=40, iters=10),
    "rap++": dict(rounds=2, n_prime=40, iters=10),
    "gsd": dict(generations=300, check_every=100),
    "gem": dict(rounds=3, steps=10, batch_size=32, latent_dim=8, hidden=(16, 16)),
    "pmw-pub": dict(workload="all-2way", rounds=3, iters=10),
    "gem-pub": dict(workload="all-2way", rounds=3, steps=10, pretrain_steps=10, batch_size=32, latent_dim=8,
                    hidden=(16, 16)),
    "privmrf": dict(loop=PGM(iters=30, tol=1e-4), generator=PGM(iters=50)),
    "dpmerf": dict(features=50, iters=30, batch_size=100, hidden=(32,)),
    "tabddpm": dict(timesteps=8, hidden=(32,), time_dim=8, epochs=1, batch_size=100),
}
FAST_GENETIC = dict(generations=300, check_every=100)
FAST_GEM = dict(steps=10, batch_size=32, latent_dim=8, hidden=(16, 16))
FAST_SELECTOR = {"aim": lambda: dict(workload="all-2way", loop=PGM(iters=30, tol=1e-4)),
                 "mwem": lambda: dict(workload="all-2way", loop=PGM(iters=50)),
                 "jam": lambda: dict(workload="all-2way", rounds=4, loop=PGM(iters=20)),
                 "gaussian": lambda: dict(workload="all-2way"),
                 "rap": lambda: dict(rounds=2, top_k=5, loop=_generator("relaxed")),
                 "rap++": lambda: dict(rounds=2, loop=_generator("relaxed")),
                 "privmrf": lambda: dict(loop=PGM(iters=30, tol=1e-4))}
FAST_GENERATOR = {"gum": lambda: GUM(iters=8, consistency_iters=30),
                  "privpgd": lambda: registry.load(registry.entry("generator", "privpgd").target)(**FAST_PGD),
                  "relaxed": lambda: registry.load(registry.entry("generator", "relaxed").target)(n_prime=40, iters=10),
                  "genetic": lambda: registry.load(registry.entry("generator", "genetic").target)(**FAST_GENETIC),
                  "gem": lambda: registry.load(registry.entry("generator", "gem").target)(**FAST_GEM)}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def table(n=400, seed=0) -> Dataset:
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d"], [4, 3, 5, 2])
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.8, a % 3, rng.integers(0, 3, n))
    c = (2 * b + rng.integers(0, 2, n)) % 5
    d = (c > 2).astype(int) ^ (rng.random(n) < 0.1)
    b[(a == 3) & (b == 2)] = 0  # the declared structural zero below holds in the data
    return Dataset(np.column_stack([a, b, c, d]), dom)


ZERO = dict(attrs=("a", "b"), cells=[(3, 2)])


def zeros(dom):
    return [StructuralZero.from_cells(dom, ZERO["attrs"], ZERO["cells"])]


def _neighbours(flags) -> list[str]:
    return ["replace_one"] if "replace_one" in flags and "public" in flags else list(NEIGHBOURS)


def _preset_cases():
    for e in registry.entries("preset"):
        for nb in _neighbours(e.flags):
            yield pytest.param(e.name, nb, id=f"{e.name}-{nb}",
                               marks=_marks(e.flags))


def _marks(flags):
    return [pytest.mark.skipif("torch" in flags and not HAS_TORCH, reason="torch"),
            pytest.mark.skipif("deep" in flags and not HAS_DEEP, reason="opacus / dp-accounting")]


def _pair_cases():
    for sel, gen in registry.pairs():
        flags = registry.entry("selector", sel).flags | registry.entry("generator", gen).flags
        for nb in _neighbours(flags):
            yield pytest.param(sel, gen, nb, id=f"{sel}x{gen}-{nb}",
                               marks=[pytest.mark.skipif("torch" in flags and not HAS_TORCH, reason="torch")])


def _generator(name):
    return FAST_GENERATOR[name]() if name in FAST_GENERATOR else registry.make_generator(name)


def _check(make, flags, nb):
    """Run the shared properties on the synthesizers ``make()`` builds (fresh, unfitted each call)."""
    data = table()
    public = table(150, seed=9) if "public" in flags else None
    kw = dict(zeros=zeros(data.domain), public=public) if public is not None else dict(zeros=zeros(data.domain))

    first = make().fit(data, **kw)
    rep = first.privacy_report()
    assert rep["neighbour"] == nb
    spent = sum(c["rho"] for c in rep["ledger"])
    assert spent == pytest.approx(rep["rho_spent"], rel=1e-12)
    if "public" in flags:  # JAM: a public choice leaves its round's measurement budget unspent
        assert spent <= first.rho_total * (1 + 1e-9)
        if first.log_ and first.log_[-1]["source"] == "private":
            assert spent == pytest.approx(first.rho_total, rel=1e-9)
    else:
        assert spent == pytest.approx(first.rho_total, rel=1e-9)
    for c in rep["ledger"]:
        assert recompute_rho(c) == pytest.approx(c["rho"], rel=1e-9), c
    codes = first.sample_codes(500)
    assert codes.shape == (500, 4) and (codes >= 0).all() and (codes < np.array(data.domain.shape)).all()
    for z in zeros(data.domain):
        assert z.violations(codes, data.domain) == 0

    again = make().fit(data, **kw)
    assert np.array_equal(again.sample_codes(500), codes), "same seed, different output"

    sel = first.selector
    source = PrecomputedSource.from_source(MemorySource(data), sel.supporting_cliques(data.domain))
    pre = make().fit(source, **kw)
    assert np.array_equal(pre.sample_codes(500), codes), "precomputed marginals gave another output"

    with pytest.raises(RuntimeError, match="second"):
        first.fit(data, **kw)
    assert first.privacy_report() == rep  # the first run's spending is still what it reports


@pytest.mark.parametrize("name, nb", list(_preset_cases()))
def test_preset_contract(name, nb):
    flags = registry.entry("preset", name).flags
    params = FAST_PRESET.get(name, {})
    _check(lambda: registry.make_preset(name, EPS, DELTA, seed=3, neighbour=nb, **params), flags, nb)


@pytest.mark.parametrize("sel, gen, nb", list(_pair_cases()))
def test_selector_generator_contract(sel, gen, nb):
    flags = registry.entry("selector", sel).flags | registry.entry("generator", gen).flags
    params = FAST_SELECTOR.get(sel, dict)
    _check(lambda: Synthesizer(registry.make_selector(sel, **params()), _generator(gen), epsilon=EPS, delta=DELTA,
                               seed=5, neighbour=nb), flags, nb)


def test_every_registry_entry_loads_and_has_a_name():
    import privmarg

    for e in registry.ENTRIES:
        obj = registry.load(e.target)
        assert obj is not None
        if e.kind in ("selector", "generator"):
            assert getattr(obj, "name", e.name) == e.name
        if e.kind == "preset":  # every preset is a class in privmarg.presets, exported by privmarg
            assert obj.__module__ == "privmarg.presets" and getattr(privmarg, obj.__name__) is obj
        if e.kind == "preset" and e.selector:  # its class combines what its entry says
            assert (obj.selector_name, obj.generator_name) == (e.selector, e.generator)
            assert obj.selector_class() is registry.load(registry.entry("selector", e.selector).target)


def _discrete_cases():
    for e in registry.entries("preset"):
        nb = _neighbours(e.flags)[0]
        yield pytest.param(e.name, nb, id=f"{e.name}-{nb}", marks=_marks(e.flags))


@pytest.mark.parametrize("name, nb", list(_discrete_cases()))
def test_preset_contract_with_discrete_noise(name, nb):
    flags = registry.entry("preset", name).flags
    params = FAST_PRESET.get(name, {})

    def make():
        return registry.make_preset(name, EPS, DELTA, seed=3, neighbour=nb, noise="discrete", **params)

    _check(make, flags, nb)
    fitted = make().fit(table(), zeros=zeros(table().domain),
                        **({"public": table(150, seed=9)} if "public" in flags else {}))
    mechs = [c["mechanism"] for c in fitted.privacy_report()["ledger"]]
    assert "discrete_gaussian" in mechs and fitted.privacy_report()["noise"] == "discrete"
    for m in fitted.measurements_:  # every noisy marginal count is an integer
        if m.sigma is not None and m.source == "private" and not m.meta.get("derived"):
            assert np.all(np.asarray(m.y) == np.round(m.y)), m.attrs


def test_jam_handing_a_precise_budget_to_aim_keeps_the_contract():
    """JAM at its defaults on this table is precise (a round's noise below N): AIM's selection runs,
    and the same properties hold (exact spend, ledger, seeds, precomputed marginals, zeros)."""
    make = lambda: registry.make_preset("jam", EPS, DELTA, seed=3, neighbour="replace_one",  # noqa: E731
                                        workload="all-2way")
    assert make().fit(table(), public=table(150, seed=9)).selection_.extra.get("delegated_to") == "aim"
    _check(make, registry.entry("preset", "jam").flags, "replace_one")


def test_a_new_generator_is_one_file_and_one_registry_line(monkeypatch):
    """The developer guide's promise: a generator in its own file (tests/toy_generator.py) plus one
    registry entry is usable by name with any selector and keeps the shared contract."""
    entry = registry.Entry("one-way", "generator", "independent columns from the 1-way marginals (test)",
                           "toy_generator:OneWayGenerator", model="one-way=toy_generator:OneWayModel")
    monkeypatch.setattr(registry, "ENTRIES", registry.ENTRIES + (entry,))
    assert "one-way" in registry.names("generator") and ("mst", "one-way") in registry.pairs()
    for sel in ("mst", "aim"):
        params = FAST_SELECTOR.get(sel, dict)
        for nb in NEIGHBOURS:
            _check(lambda: Synthesizer(registry.make_selector(sel, **params()), "one-way", epsilon=EPS,
                                       delta=DELTA, seed=5, neighbour=nb), set(), nb)


def test_a_new_generators_model_saves_and_loads_through_its_registry_line(monkeypatch, tmp_path):
    """The same one file and one line: its model is saved and loaded by privmarg.persist (which names
    no model class), answers the same marginals after loading and samples in the domain."""
    from privmarg import load as load_model

    entry = registry.Entry("one-way", "generator", "independent columns from the 1-way marginals (test)",
                           "toy_generator:OneWayGenerator", model="one-way=toy_generator:OneWayModel")
    monkeypatch.setattr(registry, "ENTRIES", registry.ENTRIES + (entry,))
    data = table()
    fit = Synthesizer(registry.make_selector("mst"), "one-way", epsilon=EPS, delta=DELTA, seed=5).fit(
        data, zeros=zeros(data.domain))
    fit.save(tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert type(back.model_).__name__ == "OneWayModel"
    assert [(z.attrs, np.asarray(z.mask).tolist()) for z in back.model_.zeros] == \
        [(z.attrs, np.asarray(z.mask).tolist()) for z in fit.model_.zeros] != []
    attrs = data.domain.attrs[:2]
    assert np.allclose(back.model_.project(attrs), fit.model_.project(attrs))
    codes = back.sample_codes(300)
    assert codes.shape == (300, len(data.domain)) and (codes < np.asarray(data.domain.shape)).all()
    monkeypatch.setattr(registry, "ENTRIES", registry.ENTRIES[:-1])  # without its line: one clear error
    with pytest.raises(ValueError, match="unknown model kind 'one-way'"):
        load_model(tmp_path / "m")
