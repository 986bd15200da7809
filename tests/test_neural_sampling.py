"""The deep generators' flat-layout samplers (issue 20) draw from the distributions they stand for:
DP-TabDDPM's reverse-diffusion step against the padded posterior its training uses, and the
per-attribute inverse-CDF draw against its probabilities."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from privmarg.core import Domain  # noqa: E402
from privmarg.generate.dpmerf import _Blocks  # noqa: E402
from privmarg.generate.tabddpm import TabDDPMModel  # noqa: E402

DOM = Domain(["a", "b", "c"], [2, 5, 3])


def test_block_draws_follow_their_probabilities(one_torch_thread):
    b = _Blocks(DOM, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, b.K).expand(60000, -1) * 2
    p = b.seg_softmax(logits)
    assert torch.allclose(b.seg_sum(p), torch.ones(60000, 3))
    codes = b.seg_sample(p * 7.0, g)  # unnormalised weights: the same draw
    for i, k in enumerate(DOM.shape):
        freq = np.bincount(codes[:, i].numpy(), minlength=k) / len(codes)
        want = p[0, b.start[i]:b.start[i] + k].numpy()
        assert np.abs(freq - want).max() < 0.01
    huge = torch.zeros(2, b.K)
    huge[:, 0] = 1e4  # attribute a far above the rest: b and c underflow under a row-wide shift
    soft = b.seg_softmax(huge)
    assert torch.isfinite(soft).all() and torch.allclose(b.seg_sum(soft), torch.ones(2, 3))
    # blocks 100 apart: under a row-wide shift the low blocks' sums were denormal but not 0, and the
    # softmax's gradient (~1/s²) overflowed to NaN (DP-MERF's training collapsed on titanic)
    far = torch.zeros(2, b.K)
    far[:, 0] = 100.0
    far.requires_grad_(True)
    (b.seg_softmax(far) * torch.randn(2, b.K)).sum().backward()
    assert torch.isfinite(far.grad).all()


def test_reverse_diffusion_matches_the_padded_posterior(one_torch_thread):
    """One reverse step (T = 1, from a fixed x_1) and the whole chain (T = 3) by the fast sampler
    and by the reference: draws from ``posterior(x_t, x̂_0(x_t), t)`` on padded one-hots."""
    m = TabDDPMModel(DOM, 100.0, timesteps=3, hidden=(16,), time_dim=4, init_seed=3)
    for p in m.net.parameters():
        p.data.mul_(4.0)  # a far-from-uniform denoiser
    n = 40000
    g = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        x = m.blocks.uniform_codes(n, g)
        for step in range(3, 0, -1):
            t = torch.full((n,), step, dtype=torch.long)
            xt = m.onehot(x)
            x = m.draw(m.posterior(xt, m.x0_probs(m.net, xt, t), t), g)
    ref = x.numpy()
    fast = m.sample(n, np.random.default_rng(2))
    for cols in ([0, 1], [1, 2], [0, 2]):
        shape = [DOM.shape[c] for c in cols]
        hr = np.bincount(np.ravel_multi_index(ref[:, cols].T, shape), minlength=np.prod(shape)) / n
        hf = np.bincount(np.ravel_multi_index(fast[:, cols].T, shape), minlength=np.prod(shape)) / n
        assert 0.5 * np.abs(hr - hf).sum() < 0.02  # TV of 2-way marginals: sampling noise is ~0.01
    assert np.abs(np.bincount(fast[:, 1], minlength=5) / n - 0.2).max() > 0.05  # the check can fail
