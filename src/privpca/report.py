"""A release report: one self-contained HTML page a data steward can read before a release.

:func:`write_release_report` writes what a fitted estimator released, under which guarantee
and how the budget was spent, in one file that needs no network: the CSS is inline and the
figures are embedded PNGs (``data:`` URIs). Every string that comes from the estimator, the
data's feature names or the command line is HTML-escaped.

Everything on the page is read from released attributes (``privacy_``, ``components_``,
``explained_variance_``, ``noise_level_``, ``expected_error_``, ...), so writing it costs no
privacy, except the private score plot, which is a release of its own with its own charged
budget (:func:`privpca.plot.scores`); its spend is shown beside the fit's, and the page states
the two composed when both are stated under the same neighbouring relation (else each is shown
on its own, and the page says why there is no total).
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import math
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from privpca import plot
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import NOISE_LABELS, PrivacyRecord, PrivacySpend

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


def _e(value: Any) -> str:
    """``value`` as escaped HTML text (quotes included: safe in attributes too)."""
    return html.escape(str(value), quote=True)


def _num(value: Any, fmt: str = ".4g") -> str:
    """A number for a table: finite as ``fmt``, ∞ as ∞, NaN or None as 'not stated'."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "not stated"
    if math.isnan(x):
        return "not stated"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return format(x, fmt)


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


def _guarantee_words(record: PrivacyRecord) -> str:
    if record.model == "non-private" or math.isinf(record.epsilon):
        return "This release is <strong>not differentially private</strong>."
    pure = record.delta == 0
    guarantee = f"(ε = {_num(record.epsilon)}" + ("" if pure else
                                                   f", δ = {_num(record.delta)}") + ")"
    factor = _num(math.exp(min(record.epsilon, 700.0)))
    meaning = (
        "Changing one record as that relation allows changes the probability of any outcome "
        f"by at most a factor e<sup>ε</sup> = {factor}"
        + ("" if pure else f", except with probability at most δ = {_num(record.delta)}")
        + ": what anyone learns from this release is nearly the same whether or not a given "
        "person's record is the one in the data."
    )
    return (f"<p class=\"guarantee\">This release is <strong>{_e(guarantee)}-differentially "
            f"private</strong> for each record, under the neighbouring relation "
            f"“{_e(_relation_words(record))}”.</p><p>{meaning}</p>")


def _relation_words(record: PrivacyRecord) -> str:
    """The record's relation with the bound's value in place of the parameter's name."""
    bound = record.data_norm
    if bound is None or not math.isfinite(float(bound)):
        return str(record.neighbouring)
    return str(record.neighbouring).replace(
        "norm <= data_norm", f"length at most {_num(bound)} (the bound D on each record)")


def _record_table(record: PrivacyRecord, table_id: str) -> str:
    rows = [
        ("ε (certified)", _num(record.epsilon)),
        ("δ", _num(record.delta)),
        ("ε asked for", _num(record.target_epsilon)),
        ("trust model", _e(TRUST_MODELS.get(record.model, record.model))),
        ("neighbouring relation", _e(record.neighbouring)),
        ("bound on each record's norm (public or released)", _num(record.data_norm)),
        ("calibration", _e(record.calibration)),
        ("how far one record can move the main release (its sensitivity, in that release's "
         "units: squared data units for a covariance or Gram matrix)", _num(record.sensitivity)),
        (f"main noise scale ({NOISE_LABELS.get(record.noise_kind, record.noise_kind)}, per "
         "coordinate)", _num(record.noise_scale)),
    ]
    out = _table(("quantity", "value"), rows, table_id=table_id, numeric=())
    out += ("<p>How the noise was set: each part of the release adds random noise sized to "
            "the most one record could change that part; the budget (ε, δ) is split between "
            "the parts listed under “How the budget was spent”.</p>")
    if record.notes:
        out += ("<details><summary>Technical notes (for a privacy engineer)</summary>"
                f"<p class=\"muted\">{_e(record.notes)}</p></details>")
    return out


def _spend_row(i: int, spend: PrivacySpend) -> list[str]:
    return [str(i), _e(spend.mechanism), _num(spend.epsilon), _num(spend.delta),
            _num(spend.sensitivity), _num(spend.noise_scale), str(int(spend.count))]


def _spends_table(record: PrivacyRecord, table_id: str) -> str:
    if not record.spends:
        return (f'<p id="{_e(table_id)}" class="missing">The record lists no separate '
                "spends: its guarantee is the one stated above, as a whole.</p>")
    rows = [_spend_row(i, s) for i, s in enumerate(record.spends, start=1)]
    header = ("#", "mechanism", "ε", "δ", "sensitivity", "noise scale (σ or b)", "count")
    naive = sum(float(s.epsilon) for s in record.spends)
    total = ("" if naive <= float(record.epsilon) * (1 + 1e-9) else
             f" The ε column adds up to {_num(naive, '.3g')}; the total stated above, "
             f"ε = {_num(record.epsilon, '.3g')}, is their exact composition (dp-accounting): "
             "the privacy losses of Gaussian releases add up like variances, so adding the ε "
             "column overstates what the release costs.")
    return _table(header, rows, table_id=table_id, numeric=(0, 2, 3, 4, 5, 6)) + (
        "<p class=\"muted\">Each row is one mechanism that read the data, with the guarantee "
        f"it certifies alone.{total}</p>")


def _error_text(est: Any) -> str:
    """The expected error in one sentence (or why there is none)."""
    name = type(est).__name__
    comps = np.atleast_2d(np.asarray(est.components_, dtype=np.float64))
    k, p = comps.shape
    cap = math.sqrt(2 * min(k, p - k)) if p > k else 0.0
    if not hasattr(est, "expected_error_"):
        text = (f"<span class=\"missing\">Not available, because {_e(name)} does not "
                "compute a bound on its subspace error.</span>")
    else:
        value = getattr(est, "expected_error_", math.nan)
        error = math.nan if value is None else float(value)
        if not math.isfinite(error):
            text = (f"<span class=\"missing\">Not available, because {_e(name)} states no "
                    "bound on its subspace error for this fit (expected_error_ is None): "
                    "nothing it released bounds the distance (in the papers' setting only the "
                    "basis is released). The noise level below, where released, is what this "
                    "fit says about its accuracy.</span>")
        elif error >= cap * (1 - 1e-9):
            text = (f"No guarantee at this n and ε: the bound reaches its maximum "
                    f"{_num(cap, '.3g')} (any two {k}-dimensional subspaces are that far "
                    "apart at most). More records or a larger ε are needed.")
        else:
            text = (f"‖V̂V̂ᵀ − VVᵀ‖<sub>F</sub> ≤ {_num(error, '.3g')} with probability 95 %, "
                    f"where V̂ spans the released components and V the top-{k} eigenvectors "
                    "of the non-private PCA of the same prepared rows (maximum "
                    f"{_num(cap, '.3g')}).")
    return text


def _error_section(est: Any) -> str:
    name = type(est).__name__
    text = _error_text(est)
    noise = getattr(est, "noise_level_", None)
    try:
        noise_f = float(noise)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        noise_f = math.nan
    if math.isfinite(noise_f):
        level = (f"Noise level released by {_e(name)}: {_num(noise_f, '.3g')} "
                 "(<code>noise_level_</code>, in explained-variance units; the scree plot "
                 "draws it as a band around each eigenvalue; the estimator's documentation "
                 "says exactly what it bounds).")
    else:
        level = (f"<span class=\"missing\">Noise level: not available, because {_e(name)} "
                 "does not release one.</span>")
    return f'<p id="expected-error">{text}</p><p>{level}</p>'


def _released_list(est: Any, names: list[str]) -> str:
    """The released values: per component, per feature, and the single numbers."""
    comps = np.atleast_2d(np.asarray(est.components_, dtype=np.float64))
    k, p = comps.shape
    out = [f"<p>{k} principal component(s) over {p} features (their weights: Loadings "
           "below).</p>"]
    variances = _finite_or_none(getattr(est, "explained_variance_", None))
    ratios = _finite_or_none(getattr(est, "explained_variance_ratio_", None))
    if variances is not None or ratios is not None:
        rows = [[str(i + 1),
                 _num(variances[i]) if variances is not None else "not released",
                 _num(ratios[i], ".3f") if ratios is not None else "not released"]
                for i in range(k)]
        out.append(_table(("component", "explained variance (private)", "share of the total"),
                          rows, table_id="released-components", numeric=(0, 1, 2)))
    mean = _finite_or_none(getattr(est, "mean_", None))
    scale = _finite_or_none(getattr(est, "scale_", None))
    if mean is not None or scale is not None:
        shown = min(p, MAX_FEATURE_ROWS)
        rows = [[_e(names[j]),
                 _num(mean[j]) if mean is not None else "not used",
                 _num(scale[j]) if scale is not None else "not used"] for j in range(shown)]
        out.append(_table(("feature", "private mean (centre)", "private scale"), rows,
                          table_id="released-features", numeric=(1, 2)))
        if shown < p:
            out.append(f"<p class=\"muted\">… and {p - shown} more features (every value is "
                       "in the fit's JSON).</p>")
    singles = []
    for attr, what in (("data_norm_", "bound D on the prepared rows' lengths"),
                       ("noise_level_", "noise level"),
                       ("expected_error_", "expected subspace error (95 %)")):
        value = _finite_or_none(getattr(est, attr, None))
        if value is not None and value.size == 1:
            singles.append((_e(what), _num(value.item()), f"<code>{_e(attr)}</code>"))
    if singles:
        out.append(_table(("value", "released", "attribute"), singles,
                          table_id="released-values", numeric=(1,)))
    return "".join(out)


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


def _relation(record: PrivacyRecord) -> str:
    """The neighbouring relation ``record``'s guarantee is stated under, up to its wording.

    Records of different estimator families word replace-one differently
    (:class:`~privpca.accounting.neighbouring.Neighbouring`); one user's record (local model)
    and one record of one provider (distributed model) are one record of the table too, so
    all of these are ``"replace"``: guarantees under it compose. ``"add-remove"`` (n private)
    is another relation: a replace-one release may publish n, which add/remove protects, so
    the two never compose into one (ε, δ). A wording no member has is its own relation.

    Parameters
    ----------
    record : PrivacyRecord

    Returns
    -------
    str
        ``"replace"``, ``"add-remove"``, ``"none"`` (not private), or the record's own text.
    """
    member = next((m for m in Neighbouring if m.description == record.neighbouring), None)
    if member is None:
        return str(record.neighbouring)
    return "replace" if member.relation.startswith("replace") else member.relation


def _total(record: PrivacyRecord, score_records: list[PrivacyRecord]) -> str:
    """The page's total of the fit and the score plot, or why there is none."""
    relations = [_relation(r) for r in [record, *score_records]]
    if len(set(relations)) == 1:
        eps, delta = _composed([record, *score_records])
        return (f'<p id="total">Together with the private score plot below, this page '
                f"releases <strong>(ε = {_e(_num(eps))}, δ = {_e(_num(delta))})</strong> in "
                "total (the two releases composed).</p>")
    plots = "; ".join(f"“{_e(r.neighbouring)}”" for r in score_records)
    return (
        '<p id="total" class="missing">No total for this page: the fit\'s guarantee is stated '
        f"under the neighbouring relation “{_e(record.neighbouring)}” and the score plot's "
        f"under {plots}. Guarantees under different neighbouring relations do not compose "
        "into one (ε, δ): under add/remove one record the number of records is private, under "
        "replace one it is public, so what one release may publish the other protects. Each "
        "guarantee holds on its own, under its own relation: read them separately.</p>")


def _composed(records: list[PrivacyRecord]) -> tuple[float, float]:
    """(ε, δ) of ``records`` composed (dp-accounting, at the sum of their δ)."""
    ledger = PrivacyLedger()
    for record in records:
        ledger.spend(record)
    delta = sum(r.delta for r in records)
    if delta <= 0:
        return sum(r.epsilon for r in records), 0.0
    return ledger.epsilon(delta), delta


def _feature_names(est: Any, feature_names: Sequence[str] | None, p: int) -> list[str]:
    if feature_names is not None:
        return [str(n) for n in feature_names]
    names = getattr(est, "feature_names_in_", None)
    return [str(n) for n in names] if names is not None else [f"x{j}" for j in range(p)]


def _score_section(est: Any, scores: Axes | None) -> tuple[str, list[PrivacyRecord]]:
    if scores is None:
        return "", []
    record: PrivacyRecord = scores.privacy_record  # type: ignore[attr-defined]
    body = (
        '<section id="scores"><h2>Private score plot</h2>'
        "<p>The rows projected on the first two private components, counted on a fixed grid "
        "inside a public box and released with noise: <strong>a release of its own</strong>, "
        "charged on the ledger in addition to the fit.</p>"
        + _png(scores, "private score plot: noisy 2-D histogram of the projections on PC1 "
               "and PC2", scores.get_title().replace("\n", "; "))
        + _guarantee_words(record)
        + _spends_table(record, "score-spends")
        + f"<p class=\"muted\">{_e(record.notes)}</p></section>"
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
    score_html, score_records = _score_section(est, scores)
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
        _guarantee_words(record),
        f'<p id="accuracy"><strong>Accuracy.</strong> {_error_text(est)}</p>',
        _data_table(record, names, data),
        "<h3>The guarantee in numbers</h3>",
        _record_table(record, "guarantee-table"),
    ]
    if score_records:
        parts.append(_total(record, score_records))
    parts += [
        "</section>",
        '<section id="released"><h2>What was released</h2>',
        _released_list(est, names),
        "</section>",
        '<section id="spends"><h2>How the budget was spent</h2>',
        _spends_table(record, "spends-table"),
        "</section>",
        '<section id="scree"><h2>Eigenvalues with their noise band</h2>',
        _png(plot.scree(est, ratio=True), "scree plot: private eigenvalues with noise band",
             "The private eigenvalues; where a noise level is released, each eigenvalue of "
             "the non-private PCA of the same prepared rows lies in the shaded band with "
             "probability ≥ 95 %, and eigenvalues below the dotted line are not resolved."),
        "</section>",
        '<section id="loadings"><h2>Loadings</h2>',
        _png(plot.loadings(est, feature_names=names), "loadings heatmap by feature",
             "Each component's weights on the features (a component's sign is arbitrary)."),
        "</section>",
        '<section id="error"><h2>Expected error</h2>',
        _error_section(est),
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
    rows += [("number of records n", _e(n)), ("features", _e(shown))]
    if not any(what == "missing values" for what, _ in (data or ())):
        rows.append(("missing values", "not recorded (privpca refuses NaN unless a public "
                                       "value is put in the missing cells)"))
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
