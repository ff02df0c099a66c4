"""privpca.report: the release report, one self-contained HTML page for a data steward.

The page is parsed as HTML and searched for anything that would need the network; then, where
Debian's ``chromium`` is installed (CI installs it), it is rendered headless and checked for
what a person would see: the headings, ε, one table row per spend, and every figure decoded.
"""

from __future__ import annotations

import base64
import html
import math
import re
import shutil
import subprocess
import warnings
from html.parser import HTMLParser

import numpy as np
import pytest

from privpca._registry import PRIVATE_ESTIMATORS
from privpca.accounting import PrivacyLedger
from privpca.datasets import make_spiked
from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
from privpca.plot import scores
from privpca.report import render_release_report, write_release_report

HEADINGS = ("The guarantee", "The data", "The guarantee in numbers",
            "What this page and the JSON contain", "What was released", "How the budget was spent",
            "Eigenvalues with their noise band", "Loadings", "Expected error",
            "Command and versions")
EVIL = "<script>alert('x')</script>"
NAMES = ["age", "income", EVIL, 'say "hi" & <b>', "visits"]


class Page(HTMLParser):
    """What the page is made of: tags, ids, table rows per table, links and images."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.urls: list[str] = []
        self.images: list[str] = []
        self.rows: dict[str, int] = {}
        self._table: list[str] = []
        self._in_body = False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("src", "href", "action", "data"):
            if a.get(key):
                self.urls.append(a[key])
        if tag == "img":
            self.images.append(a.get("src", ""))
        if tag == "table":
            self._table.append(a.get("id", ""))
        if tag == "tbody":
            self._in_body = True
        if tag == "tr" and self._in_body and self._table:
            self.rows[self._table[-1]] = self.rows.get(self._table[-1], 0) + 1

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
        if tag == "table" and self._table:
            self._table.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def released():
    X, _ = make_spiked(3_000, 5, 2, lam=9.0, random_state=2)
    ledger = PrivacyLedger()
    est = AnalyzeGaussPCA(2, epsilon=1.0, random_state=0, ledger=ledger).fit(X + 1.0)
    return est, X + 1.0, ledger


@pytest.fixture(scope="module")
def report_path(released, tmp_path_factory):
    est, X, ledger = released
    path = tmp_path_factory.mktemp("report") / "release.html"
    write_release_report(est, path, command=["privpca", "fit", "t.csv", "--epsilon", "1"],
                         feature_names=NAMES, X_scores=X, scores_epsilon=0.5, random_state=1,
                         ledger=ledger)
    return path


def test_report_is_self_contained_html(report_path):
    page = report_path.read_text(encoding="utf-8")
    doc = parse(page)
    assert page.startswith("<!DOCTYPE html>") and doc.tags.count("html") == 1
    assert "script" not in doc.tags and "link" not in doc.tags and "iframe" not in doc.tags
    # Nothing to fetch: every src/href is an embedded data: URI, no http(s) anywhere.
    assert all(url.startswith("data:image/png;base64,") for url in doc.urls), doc.urls
    assert "http://" not in page and "https://" not in page and "@import" not in page
    assert len(doc.images) == 3  # scree, loadings, score plot
    for src in doc.images:
        png = base64.b64decode(src.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


def test_report_lists_the_guarantee_and_every_spend(report_path, released):
    est, _, ledger = released
    page = report_path.read_text(encoding="utf-8")
    doc = parse(page)
    text = "".join(doc.text)
    for heading in (*HEADINGS, "Private score plot"):
        assert heading in text
    assert est.privacy_.neighbouring in text  # as the record words it: in the notes
    assert "Central model" in text
    assert doc.rows["spends-table"] == len(est.privacy_.spends)
    for spend in est.privacy_.spends:
        assert html.escape(spend.mechanism) in page
    # The score plot's own spend, and the two composed (the ledger's own figure): the total
    # is the headline, before anything else is said, and its parts follow it.
    score_record = ledger.records[-1][1]
    assert doc.rows["score-spends"] == len(score_record.spends) == 1
    assert "(ε = 0.5, δ = 0)-differentially private" in text
    total = re.search(r"This page releases \(ε = ([0-9.]+), δ = ([0-9.e-]+)\) in total", text)
    assert total is not None and text.index(total.group(0)) < text.index("In plain words")
    assert float(total.group(1)) == pytest.approx(ledger.epsilon(1e-5), rel=1e-3)
    assert 1.0 < float(total.group(1)) <= 1.5
    parts = "Its parts: the fit (ε = 1, δ = 1e-05); the private score plot (ε = 0.5, δ = 0)"
    assert parts in text
    assert "(ε = 1, δ = 1e-05)-differentially private" not in text  # no stale headline
    assert "privpca fit t.csv --epsilon 1" in text
    versions = doc.rows["versions"]
    assert versions == 6 and "dp-accounting" in text and "scikit-learn" in text


def test_report_escapes_every_string(report_path):
    page = report_path.read_text(encoding="utf-8")
    assert EVIL not in page and "<b>" not in page
    assert html.escape(EVIL) in page and html.escape(NAMES[3]) in page
    assert "script" not in parse(page).tags


def test_report_says_why_a_value_is_not_available(released):
    est, _, _ = released

    class Sampled:
        """A fit that releases components and a record only (as a sampler may)."""

    other = Sampled()
    other.components_ = est.components_
    other.privacy_ = est.privacy_
    other.expected_error_ = math.nan
    page = render_release_report(other)
    text = "".join(parse(page).text)
    assert "Not available, because Sampled states no bound" in text
    assert "Noise level: not available, because Sampled does not release one" in text
    assert "The command was not recorded" in text
    assert "explained variance not released" not in text  # the figure's title says it
    with pytest.raises(ValueError, match="no privacy_"):
        render_release_report(object())


def test_report_refuses_a_score_plot_without_its_own_budget(released, tmp_path):
    est, X, _ = released
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="scores_epsilon"):
        write_release_report(est, tmp_path / "r.html", X_scores=X, ledger=ledger)
    ax = scores(est, X, epsilon=0.3, random_state=0, ledger=ledger)
    with pytest.raises(ValueError, match="not both"):
        write_release_report(est, tmp_path / "r.html", X_scores=X, scores_epsilon=0.3,
                             scores=ax, ledger=ledger)
    assert len(ledger) == 1 and not (tmp_path / "r.html").exists()
    path = write_release_report(est, tmp_path / "r.html", scores=ax)
    assert parse(path.read_text()).rows["score-spends"] == 1


@pytest.mark.parametrize("method", sorted(PRIVATE_ESTIMATORS))
def test_report_for_every_estimator_on_defaults(method, tmp_path):
    # Enough rows for DP-PCA's minibatches and the local protocol's groups at ε = 1.
    X, _ = make_spiked(30_000, 4, 2, lam=9.0, random_state=3)
    est = PRIVATE_ESTIMATORS[method](n_components=2, epsilon=1.0, random_state=0,
                                     ledger=PrivacyLedger())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    page = write_release_report(est, tmp_path / "r.html").read_text(encoding="utf-8")
    doc = parse(page)
    text = "".join(doc.text)
    for heading in HEADINGS:
        assert heading in text, heading
    assert len(doc.images) == 2
    spends = est.privacy_.spends
    assert doc.rows.get("spends-table", 0) == len(spends)
    error = getattr(est, "expected_error_", math.nan)
    if not math.isfinite(error):
        assert "Not available, because" in text
    cells = [c for c in doc.text if c.strip()]
    assert not [c for c in cells if c.strip().lower() == "nan"]  # said in words instead


# --------------------------------------------------------------------------- in a browser
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


#: Test-only: after load, write what the browser shows into the DOM for --dump-dom to print.
PROBE = """<script>
window.addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "probe";
  const images = [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight,
                                                 i.getBoundingClientRect().width]);
  out.textContent = JSON.stringify({text: document.body.innerText, images: images});
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.skipif(_chromium() is None, reason="no chromium binary: install Debian's "
                    "'chromium' package (bash .ci/run does where apt-get is available)")
def test_report_as_a_person_sees_it_in_headless_chromium(report_path, released, tmp_path):
    import json

    est, _, _ = released
    probed = tmp_path / "probed.html"
    probed.write_text(report_path.read_text(encoding="utf-8").replace(
        "</body>", PROBE + "</body>"), encoding="utf-8")
    for _ in range(3):  # on a busy machine the DOM may be dumped before the load event
        result = subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--run-all-compositor-stages-before-draw",
             "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr[-2000:]
        dom = result.stdout
        probe = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
        if probe is not None:
            break
    assert probe is not None, dom[-2000:]
    seen = json.loads(html.unescape(probe.group(1)))
    text = seen["text"]
    for heading in (*HEADINGS, "Private score plot"):
        assert heading in text, heading
    assert "ε = 1, δ = 1e-05" in text and "ε = 0.5" in text
    # The steward's review: the page's total first, the guarantee in plain words, and that
    # other runs are not included.
    assert "in total" in text[:text.index("In plain words.")]
    assert "Other runs on the same table are not included." in text
    # What a steward reads first: the guarantee, then how accurate, then the data.
    assert text.index("differentially private") < text.index("Accuracy.") < text.index(
        "The data") < text.index("What was released")
    assert "Technical notes" in text  # folded: the jargon is one click away
    assert EVIL in text  # shown as text, never run
    assert len(seen["images"]) == 3
    for complete, width, height, shown in seen["images"]:
        assert complete and width > 100 and height > 100 and shown > 100
    doc = parse(dom)
    assert doc.rows["spends-table"] == len(est.privacy_.spends)
    assert doc.rows["score-spends"] == 1
    shot = tmp_path / "shot.png"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--no-first-run", "--disable-dev-shm-usage", "--window-size=1000,1400",
                    f"--screenshot={shot}", report_path.as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000



def test_report_of_privpca_pca_says_which_mechanism_it_chose_and_why():
    from privpca import PCA

    X = np.random.default_rng(4).standard_normal((3_000, 5))
    est = PCA(2, epsilon=1.0, random_state=0, ledger=PrivacyLedger()).fit(X)
    text = "".join(parse(render_release_report(est)).text)
    assert f"Mechanism: {est.mechanism_}, chosen by privpca.PCA" in text
    assert est.selection_reason_ in text
    plain = render_release_report(est.estimator_)
    assert "Mechanism:" not in "".join(parse(plain).text)


def test_report_shows_the_released_values_the_input_and_the_bound_in_words(released, tmp_path):
    """The values themselves (not attribute names), the input and its missing-value policy,
    the relation with the bound's value, and the ε column's sum beside the composed total."""
    est, _, _ = released
    page = render_release_report(est, feature_names=[*NAMES[:2], "c", "d", "e"],
                                 data=[("input", "survey.csv"),
                                       ("missing values", "set to 0, a public value")])
    doc = parse(page)
    text = "".join(doc.text)
    assert doc.rows["released-components"] == 2
    for ratio in est.explained_variance_ratio_:
        assert f"{ratio:.3f}" in text
    assert doc.rows["released-features"] == 5
    assert f"{est.mean_[0]:.4g}" in text
    assert f"{est.data_norm_:.4g}" in text
    assert "survey.csv" in text and "set to 0, a public value" in text
    assert f"longer than the bound D = {est.data_norm_:.4g}" in text
    naive = sum(s.epsilon for s in est.privacy_.spends)
    assert naive > 1.2 and f"adds up to {naive:.3g}" in text
    # Python callers give no input rows: the page says what it does not know.
    bare = "".join(parse(render_release_report(est)).text)
    assert "missing values" in bare and "not recorded" in bare


def test_the_shell_s_report_records_the_input_and_missing_policy(tmp_path):
    from click.testing import CliRunner

    from privpca.cli import main

    X, _ = make_spiked(3_000, 4, 2, lam=9.0, random_state=1)
    np.save(tmp_path / "t.npy", X + 2.0)
    report = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "t.npy"), "--epsilon", "1",
                                       "--seed", "0", "--missing", "0", "--report",
                                       str(report), "-o", str(tmp_path / "f.json")])
    assert result.exit_code == 0, result.output
    text = "".join(parse(report.read_text()).text)
    assert str(tmp_path / "t.npy") in text
    assert "set to 0 in every column's missing cells, a public value given with --missing" \
        in text


def _main_body(page: str) -> str:
    """The page's text outside the collapsed technical notes (what a steward reads)."""
    return "".join(parse(re.sub(r"<details>.*?</details>", "", page, flags=re.S)).text)


def test_the_guarantee_in_plain_words_for_a_steward(report_path, released):
    """The total for the page and why its parts do not add up (ε nor δ), that other runs are
    not included, who is protected (every row, the long ones shrunk to D, one row per person),
    what the length of a row is, one wording of the protected change, and what is published."""
    est, _, _ = released
    page = report_path.read_text(encoding="utf-8")
    text = _main_body(page)
    assert "the parts' ε add up to 1.5" in text.lower()
    naive = est.privacy_.naive_epsilon()
    assert f"add up to {naive:.3g}: more than the total ε" in text
    assert "not by adding ε" in text and "δ is not a sum either" in text
    assert "Other runs on the same table are not included" in text
    assert "privpca.PrivacyLedger" in text
    assert "Every row is protected" in text and "shrunk to length D" in text
    assert "How many rows were shrunk is not released" in text
    assert "The unit of protection is one row" in text and "several rows" in text
    assert "square root of the sum of squares of the row's centred values" in text
    # One wording of the protected change in the body; the records' own in the notes.
    assert text.count("one row replaced by any other row") == 2  # headline, numbers table
    for jargon in ("norm <= data_norm", "any two records", "neighbouring relation",
                   "post-processing", "Analyze Gauss", "pilot", "σ"):
        assert jargon not in text, jargon
    assert "any two records of norm <= data_norm" in "".join(parse(page).text)
    # What is published, matching the JSON of privpca fit -o (the score plot's counts too).
    listed = "".join(parse(page[page.index('id="published-list"'):]).text)
    for item in ("2 × 5 weights", "variance and its share", "mean", "the bound D",
                 f"n = {est.privacy_.n_samples}", "400 noisy counts", "privacy record"):
        assert item in listed, item
    assert "Nothing else is published" in text


def test_an_uninformative_bound_is_said_without_discouraging_or_selling_epsilon(released):
    est, _, _ = released

    class Capped:
        """A release whose error bound reaches its maximum √(2k)."""

    other = Capped()
    other.components_, other.privacy_ = est.components_, est.privacy_
    other.expected_error_ = 2.0
    text = "".join(parse(render_release_report(other)).text)
    assert "No guarantee" not in text and "More records or a larger ε are needed" not in text
    assert "not informative at this size" in text
    assert "does not mean the result is inaccurate" in text
    assert "a larger ε, which costs more privacy" in text
    assert "it can change between runs of the same command: it is an estimate" in text


def test_the_means_carry_their_noise_range_from_the_record(released):
    """± 1.96 σ per coordinate, σ the refined mean's noise on the sum over n (released)."""
    est, _, _ = released
    refine = next(s for s in est.privacy_.spends if s.mechanism.startswith("mean_refine"))
    sd = refine.noise_scale / est.privacy_.n_samples
    page = render_release_report(est)
    doc = parse(page)
    text = "".join(doc.text)
    assert doc.rows["released-features"] == 5
    assert f"± {1.96 * sd:.3g}" in text and f"standard deviation {sd:.3g}" in text
    assert "not a reason to re-run" in text


def test_secure_mode_and_the_band_are_said_as_they_are(released):
    """The noise's origin is stated (the default, or not a release), and the scree caption
    describes the band the figure draws, or why it draws none: where the variances were read
    off another release than the one the noise level describes (Analyze Gauss after choosing
    a low bound), no band around them would be true."""
    import dataclasses

    from privpca.pipeline.spectrum import HIGH_PILOT_NOTE
    from privpca.plot import variances_read_elsewhere

    est, _, _ = released
    text = "".join(parse(render_release_report(est)).text)
    assert "NOT A RELEASE: a seed was given" in text  # a seeded fit: reproducible

    class Variant:
        """The fit's released values under another record."""

    for elsewhere in (True, False):
        other = Variant()
        other.components_, other.explained_variance_ = est.components_, est.explained_variance_
        other.noise_level_ = est.noise_level_
        notes = f"…{HIGH_PILOT_NOTE}" if elsewhere else "…"
        other.privacy_ = dataclasses.replace(est.privacy_, noise_mode="secure", notes=notes)
        assert variances_read_elsewhere(other) is elsewhere
        text = "".join(parse(render_release_report(other)).text)
        assert ("no noise band is drawn" in text) is elsewhere
        assert ("the noise's 95 % range" in text) is not elsewhere
        assert "secure mode: on" in text and "NOT A RELEASE" not in text


def test_the_mean_band_is_the_central_means_noise_and_absent_where_the_record_cannot_say():
    """Central model: ± 1.96·σ/n of the refined mean, and the true means of most columns lie
    inside it. Local model: each user adds their own noise, so σ/n would be 270× too narrow
    (an outside tester: no column inside it); the band is not shown."""
    from privpca import LocalGaussianPCA
    from privpca._report_words import mean_noise_sd

    X = np.random.default_rng(12).normal(size=(20_000, 4)) * [3, 2, 1, 1] + 5
    central = AnalyzeGaussPCA(2, random_state=1, ledger=PrivacyLedger()).fit(X)
    sd = mean_noise_sd(central, central.privacy_)
    assert sd is not None and 'id="mean-noise"' in render_release_report(central)
    assert np.mean(np.abs(central.mean_ - X.mean(axis=0)) <= 1.96 * sd + 1e-12) >= 0.5
    local = LocalGaussianPCA(2, epsilon=2.0, random_state=1, ledger=PrivacyLedger()).fit(X)
    assert mean_noise_sd(local, local.privacy_) is None
    assert 'id="mean-noise"' not in render_release_report(local)


def test_a_score_plot_on_a_local_fit_says_its_trust_model_is_not_the_fits(tmp_path):
    """The score plot projects raw rows (a central release): on a local fit's page it says so,
    instead of standing under "the server never sees a raw row" alone."""
    from privpca import LocalGaussianPCA

    X = np.random.default_rng(13).normal(size=(20_000, 4)) * [3, 2, 1, 1]
    local = LocalGaussianPCA(2, epsilon=2.0, random_state=1, ledger=PrivacyLedger()).fit(X)
    ax = scores(local, X, epsilon=0.5, random_state=0, ledger=PrivacyLedger())
    text = " ".join(render_release_report(local, scores=ax).split())
    assert "Its trust model is not the fit's: it is a central release" in text
    central = AnalyzeGaussPCA(2, random_state=1, ledger=PrivacyLedger()).fit(X)
    ax = scores(central, X, epsilon=0.5, random_state=0, ledger=PrivacyLedger())
    assert "Its trust model is not" not in render_release_report(central, scores=ax)
