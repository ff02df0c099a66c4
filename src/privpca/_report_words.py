"""The release report's sentences, in plain words: the guarantee and what it covers, the total
spent and why its parts do not add up, the accuracy, and what is published.

:mod:`privpca.report` lays the page out; this module words it. Every sentence is read from
released values (the estimator's attributes and its ``privacy_`` record): writing it costs no
privacy. Code names (σ, Gram, pilot, post-processing) stay in the report's collapsed technical
notes; the sentences here use the plain words a data steward signs.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np

from privpca._config import secure_mode
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord

#: The neighbouring relation in plain words, by relation (:class:`Neighbouring`).
PLAIN_RELATIONS = {
    "replace": "one row replaced by any other row (the number of rows is public)",
    "add-remove": "one row added or removed (the number of rows stays private)",
    "replace-user": "one user's row replaced by any other (the number of users is public)",
    "replace-provider": "one row of one data provider replaced by any other row (each "
                        "provider's number of rows is public)",
    "none": "none: nothing on this page is protected",
}

#: How the noise was drawn (:attr:`PrivacyRecord.noise_mode`), in plain words.
NOISE_MODES = {
    "secure": "a cryptographic generator seeded by the operating system, with exact noise on "
              "a fine grid",
    "reproducible": "NOT A RELEASE: a seed was given, so anyone who knows it can rebuild the "
                    "noise and remove it (a reproducible run, for tests)",
    "float": "secure mode: off (PRIVPCA_SECURE_MODE=0 or secure_mode=False): ordinary "
             "floating-point noise",
    "none": "no noise (not private)",
}

#: What each part of a fit computed (the text before ":" in a spend's mechanism).
PLAIN_PARTS = {
    "bound_raw": "a bound on the rows' lengths, for the first mean (a noisy search)",
    "mean": "the mean, first round",
    "bound_residual": "a bound on the rows' distances to the first mean (a noisy search)",
    "mean_refine": "the mean, refined (the released mean)",
    "scale_bound": "bounds on each column's spread (a noisy search)",
    "scale": "each column's scale (the released scales)",
    "bound": "the bound D on the centred rows' lengths (a noisy search)",
    "bound_select": "trial versions of the main computation at several candidate bounds, "
                    "used to choose D (not published)",
    "centre": "the centre of the rows the main computation read",
    "statistic": "the main computation: the noisy covariance of the rows, from which the "
                 "components and variances are read",
}

#: Score-plot mechanisms, by their first word.
PLAIN_SCORE_PARTS = {"laplace": "the score plot's noisy counts",
                     "gaussian": "the score plot's noisy counts"}


def e(value: Any) -> str:
    """``value`` as escaped HTML text (quotes included: safe in attributes too)."""
    return html.escape(str(value), quote=True)


def num(value: Any, fmt: str = ".4g") -> str:
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


def pair(epsilon: float, delta: float) -> str:
    """``(ε = 1, δ = 1e-05)``: δ always shown (0 for pure ε-DP)."""
    return f"(ε = {num(epsilon)}, δ = {num(delta)})"


def relation(record: PrivacyRecord) -> str:
    """The neighbouring relation ``record``'s guarantee is stated under, up to its wording.

    Records of different estimator families word replace-one differently
    (:class:`~privpca.accounting.neighbouring.Neighbouring`); one user's record (local model)
    and one record of one provider (distributed model) are one record of the table too, so
    all of these are ``"replace"``: guarantees under it compose. ``"add-remove"`` (n private)
    is another relation: a replace-one release may publish n, which add/remove protects, so
    the two never compose into one (ε, δ). A wording no member has is its own relation.

    Returns
    -------
    str
        ``"replace"``, ``"add-remove"``, ``"none"`` (not private), or the record's own text.
    """
    member = _member(record)
    if member is None:
        return str(record.neighbouring)
    return "replace" if member.relation.startswith("replace") else member.relation


def _member(record: PrivacyRecord) -> Neighbouring | None:
    return next((m for m in Neighbouring if m.description == record.neighbouring), None)


def relation_plain(record: PrivacyRecord) -> str:
    """The record's relation in plain words (its own text where privpca has none)."""
    member = _member(record)
    return PLAIN_RELATIONS.get(member.relation, member.description) if member is not None \
        else str(record.neighbouring)


def composed(records: list[PrivacyRecord]) -> tuple[float, float]:
    """(ε, δ) of ``records`` composed (dp-accounting, at the sum of their δ)."""
    ledger = PrivacyLedger()
    for record in records:
        ledger.spend(record)
    delta = sum(r.delta for r in records)
    if delta <= 0:
        return sum(r.epsilon for r in records), 0.0
    return ledger.epsilon(delta), delta


def bound_of(record: PrivacyRecord) -> float | None:
    """The record's bound D on each row's length, when finite."""
    try:
        bound = float(record.data_norm)
    except (TypeError, ValueError):
        return None
    return bound if math.isfinite(bound) and bound > 0 else None


def _param(est: Any, name: str) -> Any:
    """``est``'s parameter ``name`` (that of the estimator privpca.PCA chose, if any)."""
    for obj in (getattr(est, "estimator_", None), est):
        if obj is not None and hasattr(obj, name):
            return getattr(obj, name)
    return None


def finite_scalar(value: Any) -> float | None:
    """``value`` as a finite float, or None (absent, NaN, infinite, not a number)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def private(record: PrivacyRecord) -> bool:
    return record.model != "non-private" and math.isfinite(record.epsilon)


def headline(record: PrivacyRecord, scores: list[PrivacyRecord]) -> str:
    """The box at the top: what the page as a whole releases, for each row, and its parts."""
    if not private(record):
        return ('<p class="guarantee" id="headline">This release is <strong>not '
                "differentially private</strong>.</p>")
    who = f"for each row of the table; the protected change: {e(relation_plain(record))}"
    if scores and len({relation(r) for r in [record, *scores]}) == 1:
        eps, delta = composed([record, *scores])
        parts = "; ".join([f"the fit {pair(record.epsilon, record.delta)}",
                           *(f"the private score plot {pair(r.epsilon, r.delta)}"
                             for r in scores)])
        return (f'<p class="guarantee" id="headline">This page releases <strong>'
                f"{pair(eps, delta)}</strong> in total: it is differentially private at this "
                f"(ε, δ) {who}. Its parts: {parts}, composed as explained below.</p>")
    text = (f'<p class="guarantee" id="headline">This release is <strong>'
            f"{pair(record.epsilon, record.delta)}-differentially private</strong> {who}.</p>")
    if scores:
        plots = "; ".join(f"“{e(relation_plain(r))}”" for r in scores)
        text += (
            '<p id="total" class="missing">No total for this page: the fit\'s guarantee is '
            f"stated for “{e(relation_plain(record))}” and the score plot's for {plots}. "
            "Guarantees under different rules do not compose into one (ε, δ): when one row "
            "may be added or removed the number of rows is private, when one row is replaced "
            "it is public, so what one release may publish the other protects. Each "
            "guarantee holds on its own: read them separately.</p>")
    if record.noise_mode == "reproducible":
        text += f'<p class="missing" id="not-a-release">{e(NOISE_MODES["reproducible"])}.</p>'
    return text


def meaning(est: Any, record: PrivacyRecord, scores: list[PrivacyRecord]) -> str:
    """The guarantee in plain words: who is protected, what D does, one row per person."""
    if not private(record):
        return ""
    eps, delta = (composed([record, *scores]) if scores and len(
        {relation(r) for r in [record, *scores]}) == 1 else (record.epsilon, record.delta))
    factor = num(math.exp(min(eps, 700.0)))
    out = ("<strong>In plain words.</strong> Whatever anyone learns from this page and its "
           "JSON is nearly the same whether or not any one row is in the table: changing one "
           f"row changes the probability of any outcome by at most a factor e<sup>ε</sup> = "
           f"{factor}" + ("" if delta == 0 else f", except with probability at most δ = "
                                                f"{num(delta)}") + ".")
    bound = bound_of(record)
    if bound is not None:
        origin = _param(est, "data_norm")
        chosen = ("D was chosen privately from this table (a released value, covered by the "
                  "guarantee)" if isinstance(origin, str) else
                  "D is a public value given by the user, not read off this table"
                  if origin is not None else "")
        out += (f" <strong>Every row is protected</strong>, including rows longer than the "
                f"bound D = {num(bound)}: before the computation, every such row was shrunk "
                "to length D (its direction kept), so the results describe the shrunk rows, "
                "not the rows as recorded. How many rows were shrunk is not "
                "released (it would be an exact count of the data)."
                + (f" {chosen}." if chosen else ""))
    out += (" <strong>The unit of protection is one row.</strong> If a person has several "
            "rows, they are protected less (with k rows, roughly k times ε).")
    return f'<p id="plain">{out}</p>' + (_row_length(est) if bound is not None else "")


def _row_length(est: Any) -> str:
    mean = getattr(est, "mean_", None)
    centred = mean is not None and bool(np.any(np.asarray(mean, dtype=np.float64) != 0))
    scaled = getattr(est, "scale_", None) is not None
    values = ("centred values (each value minus the released mean" +
              (", divided by the released scale)" if scaled else ")")
              if centred else "values" + (" (each divided by the released scale)"
                                          if scaled else ""))
    units = "in standard units" if scaled else "in the columns' own units"
    return (f'<p id="row-length" class="muted">The <em>length</em> of a row: the square root '
            f"of the sum of squares of the row's {values}, {units}.</p>")


def budget(record: PrivacyRecord, scores: list[PrivacyRecord]) -> str:
    """Why the parts' ε add up to more than the total, why δ is not a sum, and that other
    runs on the same table are not included."""
    if not private(record):
        return ""
    sums = []
    together = scores and len({relation(r) for r in [record, *scores]}) == 1
    total = composed([record, *scores])[0] if together else record.epsilon
    if together:
        parts = record.epsilon + sum(r.epsilon for r in scores)
        sums.append(f"the parts' ε add up to {num(parts, '.3g')}")
    naive = record.naive_epsilon()
    if len(record.spends) > 1 and naive > record.epsilon * (1 + 1e-9):
        sums.append(f"the fit's {len(record.spends)} spends' ε (under “How the budget was "
                    f"spent”) add up to {num(naive, '.3g')}")
    out = ""
    if sums:
        joined = "; ".join(sums)
        out = (f"{joined[0].upper()}{joined[1:]}: more than the total ε = {num(total)}, "
               "because the total is computed exactly from the noise of every release "
               "(dp-accounting), not by adding ε, and noisy releases combine more tightly "
               "than a sum. δ is not a sum either: the spends are composed into one δ, the "
               "total's; each spend's δ is only the δ at which its own ε is stated. ")
    out += ("<strong>Other runs on the same table are not included.</strong> Every run (a "
            "re-run of this command too) spends again and adds to what this table has spent; "
            "keeping the best-looking of several runs spends them all. privpca fit keeps no "
            "account across runs: keep one (in Python, privpca.PrivacyLedger composes "
            "several fits; each run's record is in its JSON under “privacy”).")
    return f'<p id="composition">{out}</p>'


def cap_of(est: Any) -> tuple[int, float]:
    """``(k, √(2·min(k, p − k)))``: the largest distance between two k-dim subspaces."""
    comps = np.atleast_2d(np.asarray(est.components_, dtype=np.float64))
    k, p = comps.shape
    return k, (math.sqrt(2 * min(k, p - k)) if p > k else 0.0)


def accuracy(est: Any) -> str:
    """The subspace error bound in plain words (or why there is none)."""
    name = type(est).__name__
    k, cap = cap_of(est)
    if not hasattr(est, "expected_error_"):
        return (f"<span class=\"missing\">Not available, because {e(name)} does not "
                "compute a bound on its error.</span>")
    value = getattr(est, "expected_error_", math.nan)
    error = math.nan if value is None else float(value)
    if not math.isfinite(error):
        return (f"<span class=\"missing\">Not available, because {e(name)} states no "
                "bound on its error for this fit (expected_error_ is None): nothing it "
                "released bounds the distance (in the papers' setting only the components "
                "are released). The noise level below, where released, is what this fit says "
                "about its accuracy.</span>")
    scale = (f"on a scale from 0, the same {k} directions, to {num(cap, '.3g')}, unrelated "
             "ones")
    if cap == 0:
        return ("Every component is kept (k = p): the released span is the whole space, the "
                "same as a non-private PCA's, so the distance is 0.")
    if error >= cap * (1 - 1e-9):
        text = (f"The error bound is not informative at this size: it reaches its largest "
                f"possible value, {num(cap, '.3g')} ({scale}). This does not mean the result "
                "is inaccurate, only that this bound cannot vouch for it. More rows would "
                "tighten it; so would a larger ε, which costs more privacy.")
    else:
        text = (f"The released components are within {num(error, '.3g')} of those of a "
                f"non-private PCA of the same centred and shrunk rows ({scale}), with "
                "probability 95 %.")
    text += (" This bound is computed from released values, which are noisy, so it can "
             "change between runs of the same command: it is an estimate.")
    notes = getattr(getattr(est, "privacy_", None), "notes", "")
    if "candidates (estimated error" in str(notes):
        text += (" (The errors listed per candidate bound in the technical notes are another, "
                 "rougher estimate, used only to choose D.)")
    return text


def mean_noise_sd(est: Any, record: PrivacyRecord) -> float | None:
    """The released mean's noise standard deviation per coordinate, where the record states
    it plainly: in the central model, the refined mean's noise on the sum over n rows
    (public), with no held-out rows, scales or re-centring (then the mean is that sum over
    n). None otherwise: in the local model each user of a group adds their own noise, and a
    distributed run sums the providers' (σ/n was 270× too narrow there: an outside tester)."""
    n = record.n_samples
    if not n or record.model != "central" or getattr(est, "scale_", None) is not None \
            or "held-out" in record.notes.lower():
        return None
    parts = {s.mechanism.split(":")[0]: s for s in record.spends}
    if "mean_refine" not in parts or {"scale", "scale_bound", "centre"} & parts.keys():
        return None
    spend = parts["mean_refine"]
    if "held-out" in spend.mechanism.lower() or not math.isfinite(spend.noise_scale):
        return None
    return float(spend.noise_scale) / float(n)


def noise_words(record: PrivacyRecord) -> str:
    """How the noise was drawn, and whether strict secure mode was on."""
    text = NOISE_MODES.get(record.noise_mode, record.noise_mode or "not recorded")
    if record.noise_mode != "secure":
        return text
    return ("secure mode: on, strict (PRIVPCA_SECURE_MODE=1 or secure_mode=True when this page "
            "was written: a seed is refused): " if secure_mode() else
            "secure mode: on (default, for a run without a seed): ") + text


def part_words(mechanism: str) -> str:
    """A spend's part in plain words (the mechanism's own text where none is known)."""
    head = mechanism.split(":")[0].strip()
    return PLAIN_PARTS.get(head) or PLAIN_SCORE_PARTS.get(head) or mechanism


def published(est: Any, record: PrivacyRecord, scores: list[Any],
              data: list[tuple[str, str]]) -> str:
    """The box 'What this page and the JSON contain': every published value, and nothing
    else (the JSON of ``privpca fit -o``: :func:`privpca.cli.payload._fit_payload`)."""
    k, _ = cap_of(est)
    p = np.atleast_2d(np.asarray(est.components_)).shape[1]
    items = [f"the {k} components: {k} × {p} weights (under “Loadings”)"]

    def has(attr: str) -> bool:
        value = getattr(est, attr, None)
        try:
            return value is not None and bool(np.any(np.isfinite(
                np.asarray(value, dtype=np.float64))))
        except (TypeError, ValueError):
            return False

    if has("explained_variance_") or has("explained_variance_ratio_"):
        items.append("each component's variance and its share of the total")
    if has("mean_"):
        items.append("each column's mean (the centre)")
    if has("scale_"):
        items.append("each column's scale")
    if bound_of(record) is not None:
        items.append("the bound D")
    if has("noise_level_") or has("expected_error_"):
        items.append("the noise level and the error estimate")
    items.append(f"the number of rows, n = {record.n_samples}" if record.n_samples is not None
                 else "no number of rows (it is kept private)")
    items.append("the column names" + (" and the value put in missing cells" if any(
        what == "missing values" for what, _ in data) else ""))
    items.append("the privacy record: every spend below (ε, δ, noise) and the technical notes")
    items.append("the estimator's settings")
    for ax in scores:
        counts = np.asarray(getattr(ax, "noisy_counts", np.zeros((0, 0))))
        items.append(f"the score plot's {counts.size} noisy counts, its cell edges and its "
                     "own privacy record")
    body = "".join(f"<li>{e(item)}</li>" for item in items)
    return (f'<ul id="published-list">{body}</ul><p>Nothing else is published. Values '
            "computed with noise along the way (the trial matrices used to choose D, the "
            "counts of the bound searches) are covered by the guarantee and listed under “How "
            "the budget was spent”, but are neither on this page nor in the JSON.</p>")
