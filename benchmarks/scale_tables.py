"""``scale=True`` on the real-table suite: private scales against the true standard deviations.

For every suite table of 1 000 rows or more, AnalyzeGauss with ``scale=True`` (private
per-feature scales) and the reference, AnalyzeGauss defaults on the table divided by its true
standard deviations, each against scikit-learn's ``StandardScaler`` + ``PCA(2)``: the
distance, mean and worst of three seeds, the issue's target (within 1.5× + 0.02 of the
reference, mean and worst) and the private scales' range over the true ones. ε = 1, δ = 1e-5.

    python benchmarks/scale_tables.py
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import privpca
from privpca.accounting.ledger import PrivacyLedger
from privpca.experiments.real_data_tables import SUITE, TUNING_TABLES, load_table
from privpca.metrics import subspace_distance

SEEDS = range(3)


def fits(X: np.ndarray, ref: np.ndarray, sd: np.ndarray, scaled: bool) -> tuple[list, list]:
    errors, ratios = [], []
    for seed in SEEDS:
        est = privpca.AnalyzeGaussPCA(2, epsilon=1.0, random_state=seed, scale=scaled or False,
                                      ledger=PrivacyLedger())
        try:
            est.fit(X if scaled else X / sd)
        except ValueError as exc:  # a refusal (too many features for these rows)
            return [type(exc).__name__], []
        errors.append(subspace_distance(np.asarray(est.components_).T, ref))
        if scaled:
            ratios.append(est.scale_ / sd)
    return errors, ratios


def main() -> None:
    warnings.simplefilter("ignore")
    print(f"{'table':14s} {'half':8s} {'scale=True':>15s} {'reference':>15s} {'meets':>6s} "
          "private sd / true sd")
    for name in (t for t in SUITE if SUITE[t].n >= 1000):
        X, _ = load_table(name)
        sd = X.std(axis=0, ddof=1)
        sd = np.where(sd > 0, sd, 1.0)
        ref = PCA(2).fit(StandardScaler().fit_transform(X)).components_.T
        half = "tuning" if name in TUNING_TABLES else "held-out"
        got, ratios = fits(X, ref, sd, True)
        want, _ = fits(X, ref, sd, False)
        if isinstance(got[0], str) or isinstance(want[0], str):
            print(f"{name:14s} {half:8s} {'refused':>15s}")
            continue
        meets = (np.mean(got) <= 1.5 * np.mean(want) + 0.02
                 and np.max(got) <= 1.5 * np.max(want) + 0.02)
        r = np.concatenate(ratios)
        print(f"{name:14s} {half:8s} {np.mean(got):7.3f} ({np.max(got):.3f}) "
              f"{np.mean(want):7.3f} ({np.max(want):.3f}) {'yes' if meets else 'no':>6s} "
              f"{r.min():.2f}–{r.max():.2f}", flush=True)


if __name__ == "__main__":
    main()
