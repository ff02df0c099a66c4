"""``privpca fit --scores-epsilon``: the private score plot, a release of its own, its JSON and
its lines of the summary (box half-widths, not the fit's norm bound; its own (ε, δ), then the
fit and the plot composed)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import click

from privpca.cli.refusals import refusal_says_what_was_spent
from privpca.exceptions import DataDependentWarning

__all__ = ["release_scores", "scores_payload", "scores_summary"]


def _scores_stream(seed: int | None) -> Any:
    """The score plot's noise stream: from ``--seed``, one that no fit's seed gives."""
    if seed is None:
        return None
    import numpy as np

    return np.random.SeedSequence(seed, spawn_key=(0x73636F72,))  # "scor"


def release_scores(est: Any, X: Any, epsilon: float, delta: float, bins: int,
                   bound: float | None, seed: int | None, show_data_warnings: bool) -> Any:
    """The private score plot (its own spend on the default ledger, as the fit's)."""
    from privpca import plot

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with refusal_says_what_was_spent(show_data_warnings, "the score plot"):
            ax = plot.scores(est, X, epsilon=epsilon, delta=delta, bins=bins, bound=bound,
                             random_state=_scores_stream(seed))
    for w in caught:
        if issubclass(w.category, DataDependentWarning | RuntimeWarning) \
                and not show_data_warnings:
            continue
        click.echo(f"warning: {w.category.__name__}: {w.message}", err=True)
    return ax


def _half_widths(ax: Any) -> list[float]:
    """The box's half-widths along PC1 and PC2 (the largest distance of an edge from 0)."""
    return [float(max(abs(edges[0]), abs(edges[-1]))) for edges in ax.bin_edges]


def scores_payload(ax: Any) -> dict[str, Any]:
    """The score plot's release for the JSON: its record, noisy counts, bin edges and box.

    The record's ``data_norm`` (for a score plot, the box's largest half-width, not a bound on
    the rows' norms) is written as ``box_half_widths``, one per component."""
    from privpca.cli.payload import _strict_json

    privacy = _strict_json(ax.privacy_record.to_dict())
    privacy.pop("data_norm", None)
    return {
        "privacy": privacy,
        "noisy_counts": ax.noisy_counts.tolist(),
        "pc1_edges": ax.bin_edges[0].tolist(),
        "pc2_edges": ax.bin_edges[1].tolist(),
        "box_half_widths": _half_widths(ax),
    }


def scores_summary(ax: Any, fit: Any) -> str:
    """The summary's lines for the score plot: its own guarantee and noise, its box, and the
    fit and the plot composed (other runs on the table not included)."""
    from privpca._report_words import composed, relation

    record = ax.privacy_record
    laplace = record.delta == 0.0
    reach = record.noise_scale * (math.log(20.0) if laplace else 1.96)
    same = relation(fit) == relation(record)
    rule = "the same relation as the fit" if same else f"its own relation ({record.neighbouring})"
    r1, r2 = _half_widths(ax)
    lines = [
        f"  score plot, a release of its own: ({record.epsilon:.4g}, {record.delta:.3g})-DP, "
        f"{rule}; {'Laplace' if laplace else 'Gaussian'} noise, scale {record.noise_scale:.3g} "
        f"per count (95 % of counts within ±{reach:.2g})",
        f"  score plot's box half-widths: {r1:.4g} (PC1), {r2:.4g} (PC2): scores outside are "
        "moved to the box's edge before counting",
    ]
    if same:
        eps, delta = composed([fit, record])
        lines.append(f"  total, the fit and the score plot composed: epsilon = {eps:.4g}, "
                     f"delta = {delta:.3g}; other runs on this table are not included (each "
                     "run adds to the total)")
    return "\n".join(lines)
