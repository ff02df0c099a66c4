"""Fit a peer library's private PCA in a separate interpreter (``python -m ...peers``).

diffprivlib and OpenDP are not privpca dependencies (diffprivlib does not import beside
scikit-learn ≥ 1.6), so the real-data comparison runs them in another environment that has
them: ``privpca reproduce real-data -p peer_python=/path/to/python``. That interpreter needs
numpy and the peer library only; this file imports nothing from privpca.

Protocol: ``python peers.py LIBRARY DATA.npy K EPSILON SEED`` prints one JSON line with
``components`` (k×p), ``explained_variance_ratio`` (or null) and ``seconds``; errors print
``{"error": ...}``. Each peer runs on its own defaults, as a user would, except that OpenDP
needs the public row-norm bound and n, which it takes as inputs (``row_norm`` is set to the
largest row norm of the centred data: a non-private choice, flagged in the output).
"""

from __future__ import annotations

import json
import sys
import time
import warnings


def _fit(library: str, path: str, k: int, epsilon: float, seed: int) -> dict[str, object]:
    import numpy as np

    X = np.load(path)
    start = time.perf_counter()
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        if library == "diffprivlib":
            from diffprivlib.models import PCA

            est = PCA(n_components=k, epsilon=epsilon, random_state=seed).fit(X)
            components, ratio = est.components_, est.explained_variance_ratio_
        elif library == "opendp":
            import opendp.prelude as dp

            # its PCA requires all three (ideal arithmetic, trusted callers): stated, not hidden
            dp.enable_features("contrib", "idealized-numerics", "honest-but-curious")
            from opendp.extras.sklearn.decomposition import PCA

            row_norm = float(np.linalg.norm(X - X.mean(axis=0), axis=1).max())
            est = PCA(epsilon=epsilon, row_norm=row_norm, n_samples=X.shape[0],
                      n_features=X.shape[1], n_components=k)
            est.fit(X)
            components = est.components_
            ratio = getattr(est, "explained_variance_ratio_", None)
            caught.append("row_norm set from the data (non-private input)")
        else:
            raise ValueError(f"unknown library {library!r}")
        caught += [f"{x.category.__name__}: {x.message}" for x in w][:5]
    return {
        "components": np.asarray(components).tolist(),
        "explained_variance_ratio": None if ratio is None else np.asarray(ratio).tolist(),
        "seconds": time.perf_counter() - start,
        "warnings": caught,
    }


def main(argv: list[str]) -> int:
    library, path, k, epsilon, seed = argv[1], argv[2], int(argv[3]), float(argv[4]), int(argv[5])
    try:
        out = _fit(library, path, k, epsilon, seed)
    except Exception as exc:  # report, do not crash the comparison
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
