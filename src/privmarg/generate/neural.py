"""What the neural generators share (DP-MERF, DP-TabDDPM): one-hot layout, devices, and a model
base that samples records from a torch network.

A :class:`NeuralModel` answers the :class:`~privmarg.generate.Model` protocol from samples: it
has no closed-form marginals, so structural zeros are held by redrawing the records that fall in a
forbidden cell (the model's distribution conditioned on the allowed cells), :meth:`~NeuralModel.project` counts a fixed, seeded sample of
:attr:`~NeuralModel.project_rows` records scaled to ``total``, and conditional sampling keeps the
records of unconditional batches that carry the evidence (refusing after ``max_tries`` batches
when the model gives it too little mass). Everything here is post-processing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain
from .state import domain_state, plain, read_total, zeros_from_state, zeros_to_state


def torch_device(device: Any = None):
    """``device`` as a torch device; None or ``"auto"``: CUDA when present, else CPU."""
    import torch

    if device is None or (isinstance(device, str) and device == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def offsets(domain: Domain) -> np.ndarray:
    """Start of each attribute's block in the concatenated one-hot layout (length d + 1)."""
    return np.concatenate([[0], np.cumsum(domain.shape)]).astype(np.int64)


def torch_generator(rng: np.random.Generator, device: Any):
    """A torch generator seeded from ``rng`` (so numpy seeds make torch draws reproducible)."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(int(rng.integers(2**62)))
    return g


def mlp(din: int, hidden: Sequence[int], dout: int, activation: str = "ReLU"):
    """A plain multi-layer perceptron ``din → hidden… → dout`` with ``torch.nn.<activation>`` between layers."""
    from torch import nn

    layers, d = [], din
    for h in hidden:
        layers += [nn.Linear(d, h), getattr(nn, activation)()]
        d = h
    layers.append(nn.Linear(d, dout))
    return nn.Sequential(*layers)


def seeded(make, seed: int):
    """``make()`` (e.g. a network's construction) under torch's global RNG seeded with ``seed``,
    the global state restored afterwards."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return make()


class NeuralModel:
    """Base of the torch models: subclasses set ``domain``, ``total``, ``net`` and implement
    ``_sample(rows, generator)`` (→ int64 codes, rows × d, on CPU) and ``kind`` / ``params``."""

    kind = "neural"
    project_rows = 20000
    max_tries = 50

    domain: Domain
    total: float
    params: dict
    zeros: list = []

    def _forbidden(self, codes: np.ndarray) -> np.ndarray:
        bad = np.zeros(len(codes), dtype=bool)
        for z in self.zeros:
            cols = tuple(codes[:, self.domain.attrs.index(a)] for a in z.attrs)
            bad |= np.asarray(z.mask, dtype=bool).reshape(self.domain.sizes(z.attrs))[cols]
        return bad

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records as codes (rows × attributes), drawn with a torch generator seeded from
        ``rng``; records in a structural zero are redrawn (at most ``max_tries`` times)."""
        import torch

        rows = int(rows)
        if rows == 0:
            return np.zeros((0, len(self.domain)), dtype=np.int64)
        dev = next(self.net.parameters()).device
        gen = torch_generator(rng, dev)
        with torch.inference_mode():
            out = self._sample(rows, gen)
            for _ in range(self.max_tries):
                bad = self._forbidden(out)
                if not bad.any():
                    return out
                out[bad] = self._sample(int(bad.sum()), gen)
        raise ValueError("the model puts too much mass on structural zeros to sample around them")

    def project(self, attrs: Sequence[str]) -> np.ndarray:
        """The marginal on ``attrs`` (counts, flat) of a fixed seeded sample, scaled to ``total``."""
        cache = getattr(self, "_projection_sample", None)
        if cache is None:
            cache = self._projection_sample = self.sample(self.project_rows, np.random.default_rng(0))
        attrs = list(attrs)
        idx = [self.domain.attrs.index(a) for a in attrs]
        shape = self.domain.sizes(attrs)
        if not attrs:
            return np.array([float(self.total)])
        flat = np.ravel_multi_index(tuple(cache[:, i] for i in idx), shape)
        counts = np.bincount(flat, minlength=int(np.prod(shape))).astype(float)
        return counts * (float(self.total) / max(len(cache), 1))

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence: dict) -> np.ndarray:
        """``rows`` records carrying ``evidence`` (codes), kept from unconditional batches."""
        rows = int(rows)
        idx = {self.domain.attrs.index(a): int(v) for a, v in evidence.items()}
        got, have = [], 0
        batch = max(4 * rows, 1000)
        for _ in range(self.max_tries):
            if have >= rows:
                break
            s = self.sample(batch, rng)
            keep = np.ones(len(s), dtype=bool)
            for i, v in idx.items():
                keep &= s[:, i] == v
            got.append(s[keep])
            have += int(keep.sum())
        if have < rows:
            raise ValueError(f"the model gives the condition {evidence} too little probability to sample it "
                             f"({have} of {rows} rows in {self.max_tries} batches)")
        out = np.concatenate(got)[:rows]
        out[:, list(idx)] = list(idx.values())
        return out

    @property
    def default_rows(self) -> int:
        return max(1, int(round(self.total)))

    # ------------------------------------------------------------------------- saving
    def arrays(self) -> dict[str, np.ndarray]:
        """The network's parameters and buffers as float32 arrays (for saved models)."""
        return {k: v.detach().cpu().numpy().astype(np.float32) for k, v in self.net.state_dict().items()}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        state = self.net.state_dict()
        if set(arrays) != set(state):
            raise ValueError("the saved network's parameters do not match its architecture")
        self.net.load_state_dict({k: torch.as_tensor(np.asarray(arrays[k]), dtype=state[k].dtype) for k in state})

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form: the architecture (``params``), the network's weights and the structural
        zeros it samples around."""
        weights = {}
        for i, (name, w) in enumerate(self.arrays().items()):  # array names by index: any name is safe
            arrays[f"{key}.net.{i}"] = w
            weights[name] = f"{key}.net.{i}"
        return {"domain": domain_state(self.domain), "total": float(self.total), "params": plain(self.params),
                "weights": weights, "zeros": zeros_to_state(self.zeros, key, arrays)}

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "NeuralModel":
        model = cls(domain, read_total(state), **state["params"])
        model.load_arrays({name: arrays[k] for name, k in state["weights"].items()})
        model.net.eval()
        model.zeros = zeros_from_state(state.get("zeros", []), arrays)
        return model

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_projection_sample", None)
        return state
