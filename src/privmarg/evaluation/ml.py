"""Machine-learning efficacy: train on synthetic data, score on a held-out real test split.

PrivPGD §4.1 uses scikit-learn gradient boosting with default hyper-parameters (0-1 error for
classification, MSE for regression); the benchmark paper (Chen et al. §8.3) averages macro-F1 (plus
AUC and accuracy) over MLP, CatBoost, XGBoost and random forest. Features are the integer codes of
every non-target attribute (one-hot encoded for the MLP: one hidden layer of 64, early stopping).
Default hyper-parameters otherwise (the benchmark paper tunes them per dataset; we do not).
Requires scikit-learn; XGBoost and CatBoost are used only when importable.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence

import numpy as np

from ..data import Dataset

DEFAULT_MODELS = ("gbdt", "rf", "mlp", "xgboost", "catboost")
_OPTIONAL = {"xgboost": "xgboost", "catboost": "catboost"}


def available_models(models: Sequence[str] = DEFAULT_MODELS) -> tuple[list[str], dict[str, str]]:
    """The models that can run here, and a note for each one skipped (package not installed)."""
    ok, notes = [], {}
    for name in models:
        if name not in ("gbdt", "rf", "mlp", "xgboost", "catboost"):
            raise ValueError(f"unknown model {name!r}: choose from gbdt, rf, mlp, xgboost, catboost")
        pkg = _OPTIONAL.get(name, "sklearn")
        if importlib.util.find_spec(pkg) is None:
            notes[name] = f"skipped: {pkg} is not installed"
        else:
            ok.append(name)
    return ok, notes


def infer_task(domain_size: int) -> str:
    """``classification`` for targets with at most 10 values, else ``regression`` (on the codes)."""
    return "classification" if domain_size <= 10 else "regression"


def _make_model(name: str, task: str, seed: int, sizes: list[int]):
    clf = task == "classification"
    if name == "gbdt":
        from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

        return (GradientBoostingClassifier if clf else GradientBoostingRegressor)(random_state=seed)
    if name == "rf":
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        return (RandomForestClassifier if clf else RandomForestRegressor)(n_estimators=100, random_state=seed,
                                                                          n_jobs=1)
    if name == "mlp":
        from sklearn.neural_network import MLPClassifier, MLPRegressor
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import OneHotEncoder

        enc = OneHotEncoder(categories=[np.arange(k) for k in sizes], handle_unknown="ignore")
        # small and early-stopped: as accurate as (128, 128) x 100 epochs on adult, ~15x faster
        net = (MLPClassifier if clf else MLPRegressor)(hidden_layer_sizes=(64,), batch_size=512, max_iter=30,
                                                       early_stopping=True, n_iter_no_change=5, random_state=seed)
        return make_pipeline(enc, net)
    if name == "xgboost":
        import xgboost

        return (xgboost.XGBClassifier if clf else xgboost.XGBRegressor)(random_state=seed, n_jobs=1)
    if name == "catboost":
        import catboost

        return (catboost.CatBoostClassifier if clf else catboost.CatBoostRegressor)(
            random_seed=seed, verbose=False, thread_count=1)
    raise ValueError(name)


def _score_classifier(model, X, y, classes: np.ndarray) -> dict:
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    pred = classes[np.asarray(model.predict(X)).astype(int).ravel()]
    out = {"error": float(1.0 - accuracy_score(y, pred)), "accuracy": float(accuracy_score(y, pred)),
           "f1": float(f1_score(y, pred, average="macro", zero_division=0))}
    present = np.unique(y)
    auc = None
    if len(present) >= 2:
        proba = np.asarray(model.predict_proba(X))
        full = np.zeros((len(y), len(present)))
        for c_idx, c in enumerate(classes):
            hit = np.flatnonzero(present == c)
            if hit.size:
                full[:, hit[0]] = proba[:, c_idx]
        try:
            if len(present) == 2:
                auc = float(roc_auc_score(y == present[1], full[:, 1]))
            else:
                s = full.sum(axis=1, keepdims=True)
                full = np.where(s > 0, full / np.where(s > 0, s, 1), 1.0 / len(present))
                auc = float(roc_auc_score(y, full, multi_class="ovr", average="macro", labels=present))
        except ValueError:
            auc = None
    out["auc"] = auc
    return out


class _Constant:
    """Fallback when the training labels hold a single class: always predicts it."""

    def __init__(self, n_classes: int = 1):
        self.n = n_classes

    def predict(self, X):
        return np.zeros(len(X), dtype=int)

    def predict_proba(self, X):
        return np.ones((len(X), 1))


def _fit_score(name: str, task: str, seed: int, train: Dataset, test: Dataset, target: str) -> dict:
    dom = train.domain
    t = dom.attrs.index(target)
    feats = [i for i in range(len(dom)) if i != t]
    Xtr, ytr = train.codes[:, feats], train.codes[:, t]
    Xte, yte = test.codes[:, feats], test.codes[:, t]
    sizes = [dom.shape[i] for i in feats]
    t0 = time.perf_counter()
    if task == "classification":
        classes, yenc = np.unique(ytr, return_inverse=True)
        model = _Constant() if len(classes) < 2 else _make_model(name, task, seed, sizes).fit(Xtr, yenc)
        out = _score_classifier(model, Xte, yte, classes)
        if len(classes) < 2:
            out["note"] = "training labels hold one class: constant predictor"
    else:
        from sklearn.metrics import mean_squared_error, r2_score

        model = _make_model(name, task, seed, sizes).fit(Xtr, ytr.astype(float))
        pred = np.asarray(model.predict(Xte), dtype=float).ravel()
        out = {"mse": float(mean_squared_error(yte, pred)), "r2": float(r2_score(yte, pred))}
    out["seconds"] = time.perf_counter() - t0
    return out


def ml_efficacy(synthetic: Dataset, test: Dataset, target: str, *, models: Sequence[str] = DEFAULT_MODELS,
                task: str = "auto", seed: int = 0, real_train: Dataset | None = None) -> dict:
    """Train each model on ``synthetic``, score on the real ``test`` split (per model, a dict).

    Classification: ``error`` (0-1 loss), ``accuracy``, ``f1`` (macro), ``auc`` (binary, or one-vs-rest
    macro; ``None`` when undefined). Regression: ``mse`` and ``r2`` on the target's codes. With
    ``real_train`` each model also gets a ``real`` entry (trained on real training data: the
    reference for "synthetic/real-train"). ``downstream`` is gradient boosting's error or MSE (the
    PrivPGD metric) when ``gbdt`` ran. Models whose package is missing are listed under ``skipped``.
    """
    if synthetic.domain != test.domain:
        raise ValueError("synthetic and test tables must share a domain")
    if target not in test.domain:
        raise KeyError(f"unknown target column {target!r}")
    if len(test.domain) < 2:
        raise ValueError("ML efficacy needs at least one feature besides the target")
    if task == "auto":
        task = infer_task(test.domain[target])
    if task not in ("classification", "regression"):
        raise ValueError("task must be 'auto', 'classification' or 'regression'")
    names, skipped = available_models(models)
    out: dict = {"target": target, "task": task, "models": {}, "skipped": skipped}
    for name in names:
        res = {"synthetic": _fit_score(name, task, seed, synthetic, test, target)}
        if real_train is not None:
            res["real"] = _fit_score(name, task, seed, real_train, test, target)
        out["models"][name] = res
    key = "error" if task == "classification" else "mse"
    if "gbdt" in out["models"]:
        out["downstream"] = out["models"]["gbdt"]["synthetic"][key]
        if real_train is not None:
            out["downstream_real"] = out["models"]["gbdt"]["real"][key]
    if task == "classification" and out["models"]:
        out["mean_f1"] = float(np.mean([m["synthetic"]["f1"] for m in out["models"].values()]))
    return out
