"""Plots of error curves (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: plots are files, never windows
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot_error_curves"]


def plot_error_curves(
    x: Sequence[float],
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    path: str | Path,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = True,
    logy: bool = True,
    legend_outside: bool = False,
) -> Path:
    """Save a line plot with error bars: one curve per method, ``(means, standard errors)``."""
    fig, ax = plt.subplots(figsize=(9.6 if legend_outside else 6.4, 4.6), dpi=120)
    markers = "osD^v<>p*"
    for i, (label, (mean, err)) in enumerate(curves.items()):
        ax.errorbar(x, mean, yerr=err, marker=markers[i % len(markers)], capsize=3, label=label)
    if logx:
        ax.set_xscale("log")
    if logy and all(np.all(np.asarray(m) > 0) for m, _ in curves.values()):
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if legend_outside:
        ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    else:
        ax.legend()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
