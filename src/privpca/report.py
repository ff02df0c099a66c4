"""A release report: one self-contained HTML page a data steward can read before a release.

:func:`write_release_report` writes what a fitted estimator released, under which guarantee
and how the budget was spent, in one file that needs no network: the CSS is inline and the
figures are embedded PNGs (``data:`` URIs). Every string that comes from the estimator, the
data's feature names or the command line is HTML-escaped. The sentences, in plain words, are
:mod:`privpca._report_words`'s; code names stay in the collapsed technical notes.

Everything on the page is read from released attributes (``privacy_``, ``components_``,
``explained_variance_``, ``noise_level_``, ``expected_error_``, ...), so writing it costs no
privacy, except the private score plot, which is a release of its own with its own charged
budget (:func:`privpca.plot.scores`); the page's headline is then the fit and the plot
composed, when both are stated under the same neighbouring relation (else each is shown on its
own, and the page says why there is no total).
"""

from __future__ import annotations

import base64
import datetime
import io
import math
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from privpca import _report_words as words
from privpca import plot
from privpca._report_words import e as _e
from privpca._report_words import num as _num
from privpca.accounting.record import PrivacyRecord, PrivacySpend, _spend_epsilon

__all__ = ["render_release_report", "write_release_report"]

#: The trust model of a record, in words.
TRUST_MODELS = {
    "central": "Central model: a trusted curator runs the fit on the raw rows; only the "
               "noisy outputs on this page leave it.",
    "local": "Local model: each user randomises their own record before it leaves them; "
             "the server never sees a raw row.",
    "distributed": "Distributed model: each data provider adds its own noise to what it "
                   "sends; the server sees only noisy aggregates.",
    "non-private": "Not private: nothing on this page is protected by differential privacy.",
}

#: Packages whose versions the page records (distribution names).
VERSIONED = ("privpca", "numpy", "scikit-learn", "dp-accounting", "matplotlib")

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em;
       color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.guarantee { font-size: 1.15em; background: #eef5ff; border-left: 4px solid #3b73b9;
             padding: 0.6em 1em; }
.missing { color: #7a4b00; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
.muted { color: #555; font-size: 0.9em; }
"""


def _png(ax: Axes, alt: str, caption: str) -> str:
    """``ax``'s figure as an embedded PNG in a ``<figure>``."""
    buffer = io.BytesIO()
    ax.get_figure(root=True).savefig(buffer, format="png", dpi=100)  # type: ignore[union-attr]
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{_e(alt)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, table_id: str,
           numeric: Sequence[int] = ()) -> str:
    """A table of already-escaped cells; columns in ``numeric`` right-aligned."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    head = f"<thead><tr>{head}</tr></thead>" if any(header) else ""
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if j in numeric else f"<td>{c}</td>"
                         for j, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f'<table id="{_e(table_id)}">{head}<tbody>{body}</tbody></table>'


def _record_table(est: Any, record: PrivacyRecord, table_id: str) -> str:
    bound = words.bound_of(record)
    origin = words._param(est, "data_norm")
    where = ("" if bound is None else " (chosen privately from this table)"
             if isinstance(origin, str) else " (public, given by the user)"
             if origin is not None else "")
    label = {"gaussian": "standard deviation", "laplace": "Laplace scale b",
             "exponential": "temperature"}.get(record.noise_kind, record.noise_kind)
    rows = [
        ("ε of the fit (what its noise guarantees)", _num(record.epsilon)),
        ("δ of the fit", _num(record.delta)),
        ("ε asked for", _num(record.target_epsilon)),
        ("trust model", _e(TRUST_MODELS.get(record.model, record.model))),
        ("protected change (one row)", _e(words.relation_plain(record))),
        ("bound D on each row's length", _num(record.data_norm) + _e(where)),
        ("how far one row can move the main computation (its sensitivity, in that "
         "computation's units: squared data units for a covariance matrix)",
         _num(record.sensitivity)),
        (f"noise added to each entry of the main computation ({label})",
         _num(record.noise_scale)),
        ("how the noise was drawn", _e(words.noise_words(record))),
    ]
    out = _table(("quantity", "value"), rows, table_id=table_id, numeric=())
    out += ("<p>How the noise was set: each part of the computation adds random noise sized "
            "to the most one row could change that part; the budget (ε, δ) is split between "
            "the parts listed under “How the budget was spent”. The noise level under "
            "“Expected error” is the main noise seen in the variances' units.</p>")
    return out + _notes(record)


def _notes(record: PrivacyRecord) -> str:
    """The record's notes, its relation as written and its calibration, folded."""
    text = (f"Neighbouring relation as the privacy record states it: {record.neighbouring}. "
            f"Calibration: {record.calibration}. {record.notes}")
    return ("<details><summary>Technical notes (for a privacy engineer)</summary>"
            f"<p class=\"muted\">{_e(text.strip())}</p></details>")


def _spend_row(i: int, spend: PrivacySpend) -> list[str]:
    each = _spend_epsilon(spend)[1]
    what = (f"<details><summary>{_e(words.part_words(spend.mechanism))}</summary>"
            f"<span class=\"muted\">{_e(spend.mechanism)}</span></details>")
    return [str(i), what, _num(spend.epsilon) + (" each" if each else ""), _num(spend.delta),
            _num(spend.sensitivity), _num(spend.noise_scale), str(int(spend.count))]


def _spends_table(record: PrivacyRecord, table_id: str) -> str:
    if not record.spends:
        return (f'<p id="{_e(table_id)}" class="missing">The record lists no separate '
                "spends: its guarantee is the one stated above, as a whole.</p>")
    rows = [_spend_row(i, s) for i, s in enumerate(record.spends, start=1)]
    header = ("#", "what it computed (click for the technical description)", "ε", "δ",
              "most one row can change it (sensitivity)",
              "noise scale (standard deviation; Laplace: scale b)", "releases")
    naive = record.naive_epsilon()
    total = ("" if naive <= float(record.epsilon) * (1 + 1e-9) else
             f" The ε column adds up to {_num(naive, '.3g')}; the total stated above, "
             f"ε = {_num(record.epsilon, '.3g')}, is their exact composition, and δ is not a "
             "sum (“The guarantee” says why).")
    return _table(header, rows, table_id=table_id, numeric=(0, 2, 3, 4, 5, 6)) + (
        "<p class=\"muted\">Each row is one computation that read the data, with the "
        "guarantee it certifies alone (a row's ε is for all its releases together unless "
        "marked “each”). “Released” in a technical description means computed with noise, "
        "not published: “What this page and the JSON contain” lists what is published."
        f"{total}</p>")


def _noise_level_text(est: Any) -> str:
    name = type(est).__name__
    noise = words.finite_scalar(getattr(est, "noise_level_", None))
    if noise is None:
        return (f"<span class=\"missing\">Noise level: not available, because {_e(name)} "
                "does not release one.</span>")
    text = f"Noise level: {_num(noise, '.3g')}, in the variances' units. "
    if plot.variances_read_elsewhere(est):
        return text + ("It bounds the main computation's noise on its eigenvalues, but the "
                       "variances on this page were read off another noisy release (at a "
                       "higher bound; see the technical notes), whose noise it does not "
                       "describe: no band is drawn around them.")
    return text + ("With probability ≥ 95 %, the noise moves no eigenvalue of the prepared "
                   "rows' covariance (rows centred and shrunk to length at most D) by more "
                   "than this; the scree plot draws it as a band. Shrinking lowers "
                   "eigenvalues below those of the rows as recorded, by an amount not shown.")


def _scree_caption(est: Any) -> str:
    if words.finite_scalar(getattr(est, "noise_level_", None)) is None:
        return ("The private variances of the components; no noise level was released, so "
                "no band is drawn.")
    if plot.variances_read_elsewhere(est):
        return ("The private variances of the components. They were read off a second noisy "
                "release, of the rows shrunk at a higher bound (see the technical notes), "
                "whose noise the released noise level does not measure: no noise band is "
                "drawn.")
    return ("The private variances of the components. Shaded: the noise's 95 % range: with "
            "probability ≥ 95 %, each eigenvalue of the covariance of the rows as prepared "
            "(centred and shrunk to length at most D) lies in its band. Shrinking lowers "
            "eigenvalues below those of the table as recorded, by an amount not shown, so "
            "the raw table's eigenvalues can lie above the band. Below the dotted line an "
            "eigenvalue cannot be told apart from 0. The variances are corrected for the "
            "noise's upward pull on the components it chose; a variance of 0 is one the noise "
            "hides.")


def _released_list(est: Any, record: PrivacyRecord, names: list[str]) -> str:
    """The released values: per component, per feature, and the single numbers."""
    comps = np.atleast_2d(np.asarray(est.components_, dtype=np.float64))
    k, p = comps.shape
    scaled = getattr(est, "scale_", None) is not None
    units = "standard units squared" if scaled else "the columns' units squared"
    out = [f"<p>{k} principal component(s) over {p} columns (their weights: under "
           "“Loadings”).</p>"]
    variances = _finite_or_none(getattr(est, "explained_variance_", None))
    ratios = _finite_or_none(getattr(est, "explained_variance_ratio_", None))
    if variances is not None or ratios is not None:
        rows = [[str(i + 1),
                 _num(variances[i]) if variances is not None else "not released",
                 _num(ratios[i], ".3f") if ratios is not None else "not released"]
                for i in range(k)]
        out.append(_table(("component", f"variance (private, in {units})",
                           "share of the total variance of all columns"),
                          rows, table_id="released-components", numeric=(0, 1, 2)))
    mean = _finite_or_none(getattr(est, "mean_", None))
    scale = _finite_or_none(getattr(est, "scale_", None))
    sd = words.mean_noise_sd(est, record) if mean is not None else None
    if mean is not None or scale is not None:
        shown = min(p, MAX_FEATURE_ROWS)
        header = ["column", "mean (private)", *(["± noise (95 %)"] if sd else []),
                  "scale (private)"]
        rows = [[_e(names[j]), _num(mean[j]) if mean is not None else "not used",
                 *([f"± {_num(1.96 * sd, '.3g')}"] if sd else []),
                 _num(scale[j]) if scale is not None else "not used"] for j in range(shown)]
        out.append(_table(header, rows, table_id="released-features",
                          numeric=tuple(range(1, len(header)))))
        if sd:
            out.append(f"<p class=\"muted\" id=\"mean-noise\">± is the 95 % range of the noise "
                       f"added to each mean (1.96 × its standard deviation {_num(sd, '.3g')}, "
                       "read off the privacy record: it costs nothing). The mean was computed "
                       "on rows shrunk to a private bound, which can move it a little "
                       "further. A mean outside this range is not a reason to re-run: each "
                       "run spends again.</p>")
        if shown < p:
            out.append(f"<p class=\"muted\">… and {p - shown} more columns (every value is "
                       "in the fit's JSON).</p>")
    if not scaled:
        out.append("<p class=\"muted\">The columns were not rescaled: a column with a large "
                   "spread in its own units dominates the components. --scale (scale=True) "
                   "fits standardised columns instead.</p>")
    singles = []
    for attr, what in (("data_norm_", "bound D on each row's length"),
                       ("noise_level_", "noise level"),
                       ("expected_error_", "error estimate (95 %)")):
        value = _finite_or_none(getattr(est, attr, None))
        if value is not None and value.size == 1:
            singles.append((_e(what), _num(value.item()),
                            f"<code>{_e(attr.rstrip('_'))}</code>"))
    if singles:
        out.append(_table(("value", "released", "in the JSON as"), singles,
                          table_id="released-values", numeric=(1,)))
    return "".join(out)


def _loadings_table(est: Any, names: list[str]) -> str:
    """The components' weights as numbers: one row per column (the first 40)."""
    comps = np.atleast_2d(np.asarray(est.components_, dtype=np.float64))
    shown = min(comps.shape[1], MAX_FEATURE_ROWS)
    rows = [[_e(names[j]), *(_num(w, ".3f") for w in comps[:, j])] for j in range(shown)]
    header = ("column", *(f"PC{i + 1}" for i in range(comps.shape[0])))
    return _table(header, rows, table_id="loadings-table",
                  numeric=tuple(range(1, len(header))))


#: Rows of the per-feature table of released values (the rest is in the JSON).
MAX_FEATURE_ROWS = 40


def _finite_or_none(value: Any) -> np.ndarray | None:
    """``value`` as a float array, or None if absent, text, or without a finite entry."""
    if value is None or isinstance(value, str):
        return None
    try:
        arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError):
        return None
    return arr if arr.size and np.any(np.isfinite(arr)) else None


def _versions() -> list[tuple[str, str]]:
    rows = []
    for dist in VERSIONED:
        try:
            rows.append((dist, metadata.version(dist)))
        except metadata.PackageNotFoundError:
            rows.append((dist, "not installed"))
    rows.append(("Python", platform.python_version()))
    return rows


def _feature_names(est: Any, feature_names: Sequence[str] | None, p: int) -> list[str]:
    if feature_names is not None:
        return [str(n) for n in feature_names]
    names = getattr(est, "feature_names_in_", None)
    return [str(n) for n in names] if names is not None else [f"x{j}" for j in range(p)]


def _score_words(est: Any, fit: PrivacyRecord, scores: Axes) -> str:
    """The score plot alone: its guarantee, what its noise hides, and its box."""
    record: PrivacyRecord = scores.privacy_record  # type: ignore[attr-defined]
    same = words.relation(record) == words.relation(fit)
    rule = ("for the same protected change as the fit; it is included in the page's total "
            "at the top" if same else f"for its own protected change, “"
            f"{words.relation_plain(record)}” (no total: see the top of the page)")
    laplace = record.delta == 0.0
    reach = record.noise_scale * (math.log(20.0) if laplace else 1.96)
    (x0, x1), (y0, y1) = ((edge[0], edge[-1]) for edge in scores.bin_edges)  # type: ignore[attr-defined]
    default = plot._variance_box(est)
    how = (f" (the default: ±{plot.SCORE_BOX_SDS:g} released standard deviations of each "
           "component's scores, computed from the released variances: it costs nothing)"
           if default is not None and np.allclose(default, ((x0, x1), (y0, y1))) else "")
    return (
        '<p id="score-guarantee">The score plot alone is '
        f"{words.pair(record.epsilon, record.delta)}-differentially private, {_e(rule)}. "
        "Each cell's count carries "
        f"{'Laplace' if laplace else 'Gaussian'} noise (scale {_num(record.noise_scale, '.3g')}"
        f"): 95 % of cells are within ±{_num(reach, '.2g')} of their true count, so a count "
        f"below about {_num(reach, '.2g')} cannot be told apart from an empty cell, and an "
        "isolated bright cell may be noise, not rows. Negative noisy counts are drawn as 0. "
        f"Scores outside the public box [{_num(x0, '.4g')}, {_num(x1, '.4g')}] × "
        f"[{_num(y0, '.4g')}, {_num(y1, '.4g')}]{_e(how)} were moved to its edge before "
        "counting." + _score_trust(record, fit) + "</p>")


def _score_trust(record: PrivacyRecord, fit: PrivacyRecord) -> str:
    """The score plot's trust model where it is not the fit's: it projects raw rows, so
    whoever draws it sees them (an outside tester: a local fit's page read "the server never
    sees a raw row" above a plot drawn from the raw rows)."""
    if record.model == fit.model:
        return ""
    return (f" Its trust model is not the fit's: it is a {_e(record.model)} release, drawn from "
            "the raw rows by whoever holds them (“"
            f"{_e(TRUST_MODELS.get(record.model, record.model))}”); what the page says of "
            f"the {_e(fit.model)} model holds for the fit only.")


def _score_section(est: Any, fit: PrivacyRecord,
                   scores: Axes | None) -> tuple[str, list[PrivacyRecord]]:
    if scores is None:
        return "", []
    record: PrivacyRecord = scores.privacy_record  # type: ignore[attr-defined]
    body = (
        '<section id="scores"><h2>Private score plot</h2>'
        "<p>The rows projected on the first two private components, counted on a fixed grid "
        "inside a public box and published with noise: <strong>a second release</strong>, "
        "which read the rows again and spent its own ε (in Python, on the fit's "
        "PrivacyLedger).</p>"
        + _png(scores, "private score plot: noisy 2-D histogram of the projections on PC1 "
               "and PC2", scores.get_title().replace("\n", "; "))
        + _score_words(est, fit, scores)
        + _spends_table(record, "score-spends")
        + _notes(record) + "</section>"
    )
    return body, [record]


def render_release_report(
    est: Any,
    *,
    command: str | Sequence[str] | None = None,
    feature_names: Sequence[str] | None = None,
    scores: Axes | None = None,
    title: str | None = None,
    data: Sequence[tuple[str, str]] | None = None,
) -> str:
    """The release report of ``est`` as one HTML document (a string).

    Parameters
    ----------
    est : fitted privpca estimator
        With ``components_`` and ``privacy_``.
    command : str, sequence of str or None, default=None
        The exact command (or call) that made the release, shown verbatim.
    feature_names : sequence of str or None, default=None
        Names of the features; ``None`` uses ``est.feature_names_in_`` or ``x0, x1, …``.
    scores : matplotlib.axes.Axes or None, default=None
        A private score plot already released by :func:`privpca.plot.scores` (it carries
        its ``privacy_record``); shown with its own spend.
    title : str or None, default=None
        The page's heading (default: ``"Release report: <estimator>"``).
    data : sequence of (str, str) or None, default=None
        What the steward should know about the input, as (what, value) rows: the file, the
        missing-value policy, ... (``privpca fit`` gives both). The number of records and
        the features are added from the record and ``feature_names``.

    Returns
    -------
    str
        The page, self-contained (inline CSS, embedded PNG figures, no external URL).

    See Also
    --------
    write_release_report : the same, written to a file (and the score plot made on request).
    """
    record: PrivacyRecord | None = getattr(est, "privacy_", None)
    if record is None:
        raise ValueError(f"This {type(est).__name__} has no privacy_ record: fit it before "
                         "writing its release report.")
    name = type(est).__name__
    comps = np.atleast_2d(np.asarray(est.components_, dtype=np.float64))
    names = _feature_names(est, feature_names, comps.shape[1])
    score_html, score_records = _score_section(est, record, scores)
    heading = title if title is not None else f"Release report: {name}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(heading)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(heading)}</h1>",
        f"<p class=\"muted\">{_e(repr(est))}; written "
        f"{_e(datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC'))}"
        "</p>",
        *_mechanism_choice(est),
        '<section id="guarantee"><h2>The guarantee</h2>',
        words.headline(record, score_records),
        words.meaning(est, record, score_records),
        words.budget(record, score_records),
        f'<p id="accuracy"><strong>Accuracy.</strong> {words.accuracy(est)}</p>',
        _data_table(record, names, data),
        "<h3>The guarantee in numbers</h3>",
        _record_table(est, record, "guarantee-table"),
        "</section>",
        '<section id="published"><h2>What this page and the JSON contain</h2>',
        words.published(est, record, [scores] if scores is not None else [], list(data or ())),
        "</section>",
        '<section id="released"><h2>What was released</h2>',
        _released_list(est, record, names),
        "</section>",
        '<section id="spends"><h2>How the budget was spent</h2>',
        _spends_table(record, "spends-table"),
        "</section>",
        '<section id="scree"><h2>Eigenvalues with their noise band</h2>',
        _png(plot.scree(est, ratio=True), "scree plot: private eigenvalues with noise band",
             _scree_caption(est)),
        "</section>",
        '<section id="loadings"><h2>Loadings</h2>',
        _png(plot.loadings(est, feature_names=names), "loadings heatmap by feature",
             "Each component's weights on the columns (a component's sign is arbitrary)."),
        _loadings_table(est, names),
        "</section>",
        '<section id="error"><h2>Expected error</h2>',
        f'<p id="expected-error">{words.accuracy(est)}</p><p>{_noise_level_text(est)}</p>',
        "</section>",
        score_html,
        '<section id="reproduce"><h2>Command and versions</h2>',
        _command_html(command),
        _table(("package", "version"), [(_e(a), _e(b)) for a, b in _versions()],
               table_id="versions"),
        "</section></body></html>",
    ]
    return "\n".join(parts)


def _data_table(record: PrivacyRecord, names: list[str],
                data: Sequence[tuple[str, str]] | None) -> str:
    """The input, as the steward needs it: what was read and how gaps were treated."""
    n = "private (not released)" if record.n_samples is None else str(record.n_samples)
    shown = ", ".join(names[:MAX_FEATURE_ROWS]) + (
        f", … ({len(names)} in all)" if len(names) > MAX_FEATURE_ROWS else "")
    rows = [(_e(what), _e(value)) for what, value in (data or ())]
    rows += [("number of rows n", _e(n)), ("columns", _e(shown))]
    if not any(what == "missing values" for what, _ in (data or ())):
        rows.append(("missing values", "not recorded (privpca refuses missing cells unless a "
                                       "public value is put in them)"))
    return "<h3>The data</h3>" + _table(("", ""), rows, table_id="data-table")


def _command_html(command: str | Sequence[str] | None) -> str:
    if command is None:
        return '<p id="command" class="missing">The command was not recorded.</p>'
    if not isinstance(command, str):
        import shlex

        command = shlex.join(str(c) for c in command)
    return f'<pre id="command">{_e(command)}</pre>'


def _mechanism_choice(est: Any) -> list[str]:
    """For :class:`privpca.PCA`: which mechanism it chose and why (from public quantities)."""
    chosen = getattr(est, "mechanism_", None)
    reason = getattr(est, "selection_reason_", None)
    if chosen is None or reason is None:
        return []
    return [f'<p id="mechanism">Mechanism: <strong>{_e(str(chosen))}</strong>, chosen by '
            f"privpca.PCA from public quantities only: {_e(str(reason))}</p>"]


def write_release_report(
    est: Any,
    path: str | Path,
    *,
    command: str | Sequence[str] | None = None,
    feature_names: Sequence[str] | None = None,
    X_scores: Any = None,
    scores_epsilon: float | None = None,
    scores_delta: float = 0.0,
    scores_bins: int = 20,
    scores_bound: Any = None,
    scores: Axes | None = None,
    random_state: Any = None,
    ledger: Any = None,
    data: Sequence[tuple[str, str]] | None = None,
) -> Path:
    """Write the release report of a fitted estimator: one self-contained HTML file.

    The page holds the guarantee in words and numbers (ε, δ, the neighbouring relation, the
    trust model), a table of every spend of the fit, the scree plot with its noise band, the
    loadings with the feature names, the expected error (or why it is not available), the
    private score plot when asked for (with its own spend and the total), and the exact
    command and package versions. No network is needed to read it.

    Parameters
    ----------
    est : fitted privpca estimator
    path : str or pathlib.Path
        Where to write the page (its folder is created).
    command : str, sequence of str or None, default=None
        The exact command that made the release, shown verbatim.
    feature_names : sequence of str or None, default=None
        Names of the features (default ``est.feature_names_in_`` or ``x0, x1, …``).
    X_scores : array-like or None, default=None
        Rows for a private score plot (:func:`privpca.plot.scores`), released here with its
        own budget ``scores_epsilon`` (required with it) and charged on ``ledger``.
    scores_epsilon, scores_delta, scores_bins, scores_bound
        The score plot's ``epsilon``, ``delta``, ``bins`` and ``bound``.
    scores : matplotlib.axes.Axes or None, default=None
        A score plot released already by :func:`privpca.plot.scores` (instead of
        ``X_scores``).
    random_state, ledger
        The score plot's noise stream and ledger.
    data : sequence of (str, str) or None, default=None
        The input as the steward should know it (see :func:`render_release_report`).

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    ValueError
        If ``X_scores`` is given without ``scores_epsilon``, or with ``scores``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from privpca.accounting import PrivacyLedger
    >>> from privpca.datasets import make_spiked
    >>> from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
    >>> from privpca.report import write_release_report
    >>> X, _ = make_spiked(2_000, 4, 2, lam=9.0, random_state=0)
    >>> ledger = PrivacyLedger()
    >>> est = AnalyzeGaussPCA(2, epsilon=1.0, random_state=0, ledger=ledger).fit(X)
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "release.html"
    >>> page = write_release_report(est, out, X_scores=X, scores_epsilon=0.5,
    ...                             random_state=0, ledger=ledger)
    >>> "How the budget was spent" in page.read_text()
    True
    """
    if X_scores is not None:
        if scores is not None:
            raise ValueError("Give X_scores (to release a score plot here) or scores (one "
                             "released already), not both.")
        if scores_epsilon is None:
            raise ValueError("A private score plot is a release of its own: give "
                             "scores_epsilon (its ε) with X_scores.")
        scores = plot.scores(est, X_scores, epsilon=scores_epsilon, delta=scores_delta,
                             bins=scores_bins, bound=scores_bound, random_state=random_state,
                             ledger=ledger)
    page = render_release_report(est, command=command, feature_names=feature_names,
                                 scores=scores, data=data)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
