"""Plots of error curves (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: plots are files, never windows
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot_error_curves", "plot_panels"]


def _save(fig: Any, path: str | Path) -> Path:
    """Lay out ``fig``, write it to ``path`` (creating its folder) and close it."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


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
    return _save(fig, path)


def plot_panels(
    panels: Sequence[tuple[Any, Mapping[str, Mapping[float, tuple[float, float, int]]]]],
    path: str | Path,
    *,
    suptitle: str = "",
) -> Path:
    """Save one subplot per panel: a curve per series, mean with standard-error bars.

    Series labels ``"a, b"`` (several series columns) get the colour of ``a`` and the marker
    and line style of ``b``, so a method keeps its colour across, e.g., values of k.

    Parameters
    ----------
    panels : sequence of (Panel, stats)
        ``stats`` is ``{series label: {x: (mean, standard error, count)}}``, as returned by
        :func:`privpca.experiments.runner.summarise`; the panel gives the axis labels, the
        title and the scales.
    path : path
        PNG file to write.
    suptitle : str, default=""
    """
    n = max(len(panels), 1)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 5.6 * rows), dpi=110, squeeze=False)
    markers = "osD^v<>p*hX"
    styles = ["-", "--", ":", "-."]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (panel, stats) in zip(axes.flat, panels, strict=False):
        heads = list(dict.fromkeys(label.split(", ")[0] for label in stats))
        tails = list(dict.fromkeys(", ".join(label.split(", ")[1:]) for label in stats))
        positive = True
        for label, by_x in stats.items():
            head, tail = label.split(", ")[0], ", ".join(label.split(", ")[1:])
            i, j = heads.index(head), tails.index(tail)
            xs = list(by_x)
            mean = [by_x[x][0] for x in xs]
            err = [by_x[x][1] for x in xs]
            positive = positive and all(m > 0 for m in mean)
            ax.errorbar(
                xs,
                mean,
                yerr=err,
                color=colours[i % len(colours)],
                marker=markers[j % len(markers)],
                linestyle=styles[(j // len(markers)) % len(styles)] if len(tails) > 1 else "-",
                capsize=3,
                markersize=4,
                label=label,
            )
        if panel.logx:
            ax.set_xscale("log")
        if panel.logy and positive:
            ax.set_yscale("log")
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title, fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(
            fontsize="x-small",
            loc="upper center",
            bbox_to_anchor=(0.5, -0.14),
            ncol=2 if len(stats) > 4 else 1,
            frameon=False,
        )
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    if suptitle:
        fig.suptitle(suptitle, fontsize="medium")
    return _save(fig, path)
