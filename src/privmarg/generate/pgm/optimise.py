"""The estimator's step rules over the log potentials φ (SPEC §3.6): mirror descent with heavy-ball
momentum and adaptive restart (:func:`_momentum`, the default), and mirror descent with an Armijo
line search, optionally after a diagonally preconditioned step (:func:`_line_search`). Each is
handed the loss (an :class:`~.estimate._Evaluator`) and the state, and moves φ; post-processing,
no privacy cost."""

from __future__ import annotations

import numpy as np

MOMENTUM_GROW = 1.01  # step growth per accepted momentum step once a step has been rejected (mbi's rule)
# the preconditioned step's growth before each try and shrink after a rejected one: doubling and
# quartering failed every third try or so, each failure a wasted evaluation (RESULTS, issue 18)
PRECOND_GROW, PRECOND_SHRINK = 1.5, 0.2


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    # einsum rather than BLAS ddot: multi-threaded BLAS spins badly on a loaded 2-core machine
    return float(np.einsum("i,i->", a, b))


def _line_search(evaluate, direction, state, alpha, alpha_p, grow, iters, tol, precond, history, callback, floor):
    """Mirror descent with an Armijo line search (SPEC §3.6 A), or first a diagonally
    preconditioned step (``precond``) falling back to it: steps grow by ``grow`` before each try
    and halve until the loss falls enough. ``state`` = [φ, μ, loss, ∇, x] is emptied (so the caller
    pins no tree-sized μ). Returns (φ, μ, loss, ∇, x, step, preconditioned step, iterations,
    converged)."""
    phi, mu, loss, grads, xs = state
    state.clear()
    it, converged, backtracked = 0, False, False
    stalled = 0
    window = 0  # history index where the current optimiser's convergence window starts
    for it in range(1, iters + 1):
        ok = False
        if precond:
            # one try along the preconditioned direction; on failure shrink its step and fall
            # back to a plain mirror-descent step (a second try costs more than it gains)
            alpha_p = min(alpha_p * PRECOND_GROW, 1.0)
            cand = phi - alpha_p * direction(grads, xs)
            res = mu_c = None  # a rejected try's arrays go back to the pool first
            res = evaluate(cand, trial=True)
            if res is not None:
                mu_c, loss_c, grads_c, xs_c = res
                dec = _dot(grads, xs - xs_c)  # ⟨∇L(μ), μ − μ'⟩ through the measured marginals
                ok = dec > 0 and loss - loss_c >= 0.25 * dec
            if not ok:
                alpha_p = max(alpha_p * PRECOND_SHRINK, 1e-3)
        if not ok:
            alpha *= grow
            for _ in range(30):
                cand = phi - alpha * grads
                res = mu_c = None
                res = evaluate(cand, trial=True)
                if res is not None:
                    mu_c, loss_c, grads_c, xs_c = res
                    if loss_c <= loss and loss - loss_c >= 0.5 * alpha * _dot(grads, xs - xs_c):
                        ok = True
                        break
                alpha *= 0.5
                backtracked = True
            if not ok and (res is None or loss_c > loss):
                # no acceptable step within 30 halvings (a wild initial step): stay put and go
                # on shrinking next iteration; the tolerance test waits for real steps
                stalled += 1
                if stalled > 100:
                    break
                continue
        phi, mu, loss, grads, xs = cand, mu_c, loss_c, grads_c, xs_c
        history.append(loss)
        if callback is not None:
            callback(it, loss)
        # the tolerance applies once the step size has found its scale (first backtrack)
        if ((backtracked or precond) and len(history) - window >= 11
                and history[-11] - loss <= tol * max(loss, 1e-300)):
            if precond:
                # the diagonal step can crawl far from the optimum (seen with exact public
                # marginals full of empty cells next to a big-count marginal, equal weights):
                # only plain mirror descent stalling too counts as convergence
                precond, window = False, len(history) - 1
                continue
            converged = True
            break
        if loss <= floor:
            converged = True
            break
    return phi, mu, loss, grads, xs, alpha, alpha_p, it, converged


def _momentum(evaluate, state, alpha, grow, iters, tol, history, callback, floor):
    """Mirror descent with heavy-ball momentum on the log potentials and adaptive restart: one
    belief-propagation pass per step. Step k moves by −α∇L + β_k·(last move), β_k = k/(k+3); a step
    that does not lower the loss is dropped and the momentum restarted (k = 0), or, with no momentum
    to drop, the step size halved. The step size grows by ``grow`` per accepted step until the first
    rejection, then by :data:`MOMENTUM_GROW`. Comparisons with plain mirror descent and mbi:
    benchmarks/RESULTS.md (issue 22)."""
    phi, mu, loss, grads, xs = state
    state.clear()
    velocity = np.zeros_like(phi)
    k = it = 0
    found_scale = converged = False
    while it < iters:
        it += 1
        beta = k / (k + 3.0)
        cand = phi - alpha * grads + beta * velocity if k else phi - alpha * grads
        res = None  # a rejected step's arrays go back to the buffer pool before the next evaluation
        res = evaluate(cand, trial=True)
        if res is None or not res[1] < loss:
            found_scale = True
            if k:  # restart: drop the momentum, keep the step size
                k = 0
                continue
            for _ in range(30):  # no momentum to blame: shrink the step until it lowers the loss
                alpha *= 0.5
                cand = phi - alpha * grads
                res = None
                res = evaluate(cand, trial=True)
                if res is not None and res[1] < loss:
                    break
            else:
                if res is not None and res[1] - loss <= 1e-12 * abs(loss):
                    converged = True  # a step 2^-30 shorter changes the loss at rounding level only
                    break
                continue
        velocity = cand - phi
        phi, (mu, loss, grads, xs) = cand, res
        k += 1
        alpha *= MOMENTUM_GROW if found_scale else grow
        history.append(loss)
        if callback is not None:
            callback(it, loss)
        if found_scale and len(history) >= 11 and history[-11] - loss <= tol * max(loss, 1e-300):
            converged = True
            break
        if loss <= floor:
            converged = True
            break
    return phi, mu, loss, grads, xs, alpha, it, converged
