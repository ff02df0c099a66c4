"""Benchmark of the Fantope/ADMM (FPS) solver on a locally private sparse-PCA problem.

The problem mimics Wang & Xu's local-DP sparse PCA:

* ``X`` (n x p): a row-sparse spiked sample.  Each row is ``V_s diag(sqrt(ell)) z +
  0.3 e / sqrt(p)`` with ``V_s`` an orthonormal ``s x k`` loading supported on ``s``
  random coordinates, ``ell`` = linspace(20, 5, k), ``z``, ``e`` standard normal; rows are
  then scaled to norm at most 1 (the boundedness the Gaussian mechanism's sensitivity
  assumes).
* ``Z`` (p x p): the sum of the users' symmetric Gaussian noise matrices, i.e. per-entry
  standard deviation ``sigma1 * sqrt(n)`` with ``sigma1 = sqrt(2 ln(1.25 / delta)) *
  sqrt(2) / eps``.  Built cheaply as ``(G + G^T) / sqrt(2)`` from one full Gaussian
  matrix ``G`` (right off-diagonal variance), with the diagonal rescaled by
  ``1 / sqrt(2)`` so that every entry has exactly that standard deviation.
* ``S = (X^T X + Z) / n`` and ``lam = (sigma1 / sqrt(n)) * sqrt(2 ln(p^2)) * f`` with
  ``f = 1/4`` by default (``--lam-factor``); ``f = 1`` puts ``lam`` at the level of the
  largest noise entry, which makes the solution sparse and the projections low rank.

Printed per ``p``: seconds per ADMM iteration (total / n_iter) split into the Fantope
projection and the rest, the number of iterations, which eigensolver path served each
projection and how many eigenpairs contributed, peak memory, and the time of one full
``scipy.linalg.eigh`` of a p x p matrix for comparison (at p > 2000 only with
``--full-eigh``).  Memory is reported two ways: ``ru_maxrss`` (the process's resident-set
high-water mark, everything included, cumulative over the run) and the ``tracemalloc``
peak during the solve (memory allocated through NumPy/Python only, e.g. not OpenBLAS's
internal buffers).

Usage::

    python benchmarks/bench_fantope.py --p 2000
    python benchmarks/bench_fantope.py --p 2000 7128 --max-iter 10 --full-eigh
    python benchmarks/bench_fantope.py --p 7128 --eps inf --lam 1e-4   # no privacy noise
    python benchmarks/bench_fantope.py --p 7128 --max-iter 10 --max-eig none  # exact projections
    python benchmarks/bench_fantope.py --p 7128 --max-iter 20 --max-eig none 256 \
        --projection-dtype float32   # exact and capped side by side, with their accuracy

With several ``--max-eig`` or ``--projection-dtype`` values every combination is solved on the
same ``S`` and compared with the first: ``||Y - Y_first||_F``, and for each the distance
``||V̂V̂ᵀ - VVᵀ||_F`` of the top-k eigenvectors of ``Y`` to the planted subspace (max
``sqrt(2k)``) beside the support rows recovered.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import time
import tracemalloc

import numpy as np
import scipy.linalg

from privpca.solvers import fantope_admm


def make_problem(
    p: int,
    n: int,
    k: int,
    s: int,
    eps: float,
    delta: float,
    lam_factor: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float, np.ndarray, float, np.ndarray]:
    """Return ``(S, lam, support, sigma1, V)``, ``V`` (p x k) the planted loadings; see the
    module docstring."""
    sigma1 = math.sqrt(2.0 * math.log(1.25 / delta)) * math.sqrt(2.0) / eps  # 0 if eps=inf
    support = np.sort(rng.choice(p, s, replace=False))
    Vs = np.linalg.qr(rng.standard_normal((s, k)))[0]
    ell = np.linspace(20.0, 5.0, k)
    X = 0.3 * rng.standard_normal((n, p)) / math.sqrt(p)
    X[:, support] += (rng.standard_normal((n, k)) * np.sqrt(ell)) @ Vs.T / math.sqrt(ell.sum())
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    if sigma1 > 0:
        S = rng.standard_normal((p, p))
        S += S.T  # numpy buffers the overlapping transpose
        S *= sigma1 * math.sqrt(n) / math.sqrt(2.0)
        S.flat[:: p + 1] /= math.sqrt(2.0)
        S += X.T @ X
    else:
        S = X.T @ X
    S /= n
    lam = sigma1 / math.sqrt(n) * math.sqrt(2.0 * math.log(float(p) * p)) * lam_factor
    V = np.zeros((p, k))
    V[support] = Vs
    return S, lam, support, sigma1, V


def time_full_eigh(p: int, rng: np.random.Generator) -> dict[str, float]:
    """Seconds of one full eigendecomposition of a random symmetric p x p matrix."""
    M = rng.standard_normal((p, p))
    M += M.T
    out = {}
    for label, kwargs in (("default (evr)", {}), ("evd", {"driver": "evd"})):
        t0 = time.perf_counter()
        scipy.linalg.eigh(M, **kwargs)
        out[label] = time.perf_counter() - t0
    return out


def _blas_threads() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover
        return "?"
    return ", ".join(
        f"{i.get('internal_api')}:{i.get('num_threads')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    )


def _runs(methods: list[str], contrib: list[int], seconds: list[float]) -> str:
    """Per-iteration path, contributing count and seconds, e.g. ``3:f84/1.02``."""
    return " ".join(
        f"{i}:{m[0]}{c}/{t:.2f}"
        for i, (m, c, t) in enumerate(zip(methods, contrib, seconds, strict=True), start=1)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=int, nargs="+", default=[2000], help="dimensions to run")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--s", type=int, default=20, help="support size (non-zero rows)")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--lam-factor", type=float, default=0.25)
    ap.add_argument(
        "--lam",
        type=float,
        default=None,
        help="override lam (e.g. with --eps inf, i.e. no privacy noise, to time the "
        "low-rank regime where the Krylov path serves the projections)",
    )
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--eig-method", choices=["auto", "full", "partial"], default="auto")
    ap.add_argument(
        "--max-eig",
        nargs="+",
        default=["auto"],
        help="cap on eigenpairs per projection: 'auto' (exact up to p = 4000, 256 above), "
        "'none' (always exact) or an integer (inexact, error-bounded projections); give "
        "several to run them side by side on the same S",
    )
    ap.add_argument(
        "--float64", action="store_true", help="capped path in float64 (default float32)"
    )
    ap.add_argument(
        "--projection-dtype",
        nargs="+",
        choices=["float64", "float32"],
        default=["float64"],
        help="precision of the exact (LAPACK) projections; give both to run them side by "
        "side on the same S and print how far apart the solutions are",
    )
    ap.add_argument(
        "--full-eigh",
        action="store_true",
        help="also time a full eigh at p > 2000 (slow: minutes at p = 7128)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    print(
        f"cores={os.cpu_count()} blas_threads=[{_blas_threads()}] "
        f"loadavg={os.getloadavg()[0]:.2f} numpy={np.__version__} scipy={scipy.__version__}"
    )
    for p in args.p:
        rng = np.random.default_rng(args.seed)
        t0 = time.perf_counter()
        S, lam, support, sigma1, V = make_problem(
            p, args.n, args.k, args.s, args.eps, args.delta, args.lam_factor, rng
        )
        t_build = time.perf_counter() - t0
        if args.lam is not None:
            lam = args.lam
        print(
            f"\n=== p={p} n={args.n} k={args.k} s={args.s} eps={args.eps} "
            f"delta={args.delta} sigma1={sigma1:.3f} lam={lam:.4f} "
            f"(built in {t_build:.1f} s; loadavg {os.getloadavg()[0]:.2f})"
        )
        solutions: dict[str, np.ndarray] = {}
        for cap in args.max_eig:
            max_eig: int | str | None = (
                None if cap == "none" else "auto" if cap == "auto" else int(cap)
            )
            for dtype in args.projection_dtype:
                label = f"max_eig={cap}, projection_dtype={dtype}"
                solutions[label] = _solve_and_report(
                    args, S, lam, support, V, p, max_eig, dtype, label
                )
        if len(solutions) > 1:
            first, *rest = solutions
            a = solutions[first]
            print(f"\nside by side on the same S, against {first} "
                  f"(||Y||_F = {np.linalg.norm(a):.3g}):")
            for label in rest:
                print(f"  {label}: ||Y - Y_first||_F = "
                      f"{np.linalg.norm(solutions[label] - a):.3g}")
        del S, solutions
        if p <= 2000 or args.full_eigh:
            for label, sec in time_full_eigh(p, np.random.default_rng(1)).items():
                print(f"one full scipy.linalg.eigh {label} at p={p}: {sec:.2f} s")
        else:
            print(f"(full eigh at p={p} not timed; pass --full-eigh)")
    print(f"\nloadavg at end {os.getloadavg()[0]:.2f}")


def _solve_and_report(
    args: argparse.Namespace,
    S: np.ndarray,
    lam: float,
    support: np.ndarray,
    V: np.ndarray,
    p: int,
    max_eig: int | str | None,
    dtype: str,
    label: str,
) -> np.ndarray:
    """One ADMM solve with the given cap and projection precision; prints its figures."""
    print(f"\n--- {label}")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    res = fantope_admm(
        S,
        args.k,
        lam,
        tol=args.tol,
        max_iter=args.max_iter,
        eig_method=args.eig_method,
        max_eig=max_eig,  # type: ignore[arg-type]
        capped_float32=not args.float64,
        projection_dtype=dtype,
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    it = res.n_iter
    per_it = res.seconds / it
    per_proj = res.projection_seconds / it
    counts = {
        m: res.eig_method_history.count(m) for m in ("partial", "subset", "full", "capped")
    }
    secs = np.array(res.seconds_history)
    print(
        f"iterations={it} converged={res.converged} "
        f"primal={res.primal_residual:.3g} dual={res.dual_residual:.3g} "
        f"(target {math.sqrt(args.k) * args.tol:.3g}) final rho={res.rho:.4g}"
    )
    print(
        f"seconds/iteration={per_it:.3f} (projection {per_proj:.3f}, rest "
        f"{per_it - per_proj:.3f}); median {np.median(secs):.3f}; total {res.seconds:.1f} s"
    )
    print(
        f"projection paths: {counts} (abandoned attempts: Krylov "
        f"{res.failed_partial_attempts}, subset {res.failed_subset_attempts}); "
        f"contributing eigenpairs min/median/max = {min(res.n_contrib_history)}/"
        f"{int(np.median(res.n_contrib_history))}/{max(res.n_contrib_history)}"
    )
    by_path = ", ".join(
        f"{m} {np.median(secs[[h == m for h in res.eig_method_history]]):.3f}"
        for m, c in counts.items()
        if c
    )
    print(f"  median s/iteration by path: {by_path}")
    bounds = np.array(res.error_bound_history)
    print(
        f"  projection error bound (Frobenius, vs exact; max possible sqrt(2k) = "
        f"{math.sqrt(2 * args.k):.3f}): max {bounds.max():.3g}, last {bounds[-1]:.3g} "
        f"(max_eig={res.max_eig})"
    )
    print(
        "  per iteration: path (p=partial, s=subset, f=full, c=capped), contributing "
        "pairs / seconds:"
    )
    print("  " + _runs(res.eig_method_history, res.n_contrib_history, res.seconds_history))
    print(
        f"memory: S is {S.nbytes / 2**20:.0f} MiB; tracemalloc peak during solve "
        f"{peak / 2**20:.0f} MiB ({peak / S.nbytes:.2f} x S); ru_maxrss high-water "
        f"{rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB"
    )
    Y = res.solution
    row_norm = np.linalg.norm(Y, axis=1)
    top = np.argsort(row_norm)[::-1][: args.s]
    off = np.setdiff1d(np.arange(p), support)
    print(
        f"solution: nnz={np.count_nonzero(Y)} ({np.count_nonzero(Y) / Y.size:.2%}), "
        f"support rows among top-{args.s} row norms: {np.intersect1d(top, support).size}"
        f"/{args.s}, off-support Frobenius share "
        f"{np.linalg.norm(Y[off]) / max(np.linalg.norm(Y), 1e-300):.3f}"
    )
    U = scipy.linalg.eigh(Y, subset_by_index=[p - args.k, p - 1])[1]
    err = np.linalg.norm(U @ U.T - V @ V.T)
    print(f"accuracy: ||UU^T - VV^T||_F = {err:.3f} for the top-{args.k} eigenvectors U of Y "
          f"(max {math.sqrt(2 * args.k):.3f})")
    return Y

if __name__ == "__main__":
    main()
