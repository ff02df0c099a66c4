"""Issue 35: every (ε, δ) → noise calibration is written once, in accounting/calibration.py.

The source scan below fails when a calibration formula appears anywhere else in privpca; the
closed-form checks pin what that one module computes.
"""

from __future__ import annotations

import ast
import math
import pathlib

import dp_accounting
import pytest
from scipy.stats import norm

import privpca
from privpca.accounting import calibration as cal
from privpca.accounting import compose_epsilon
from privpca.exceptions import PrivacyLeakWarning
from privpca.mechanisms.gaussian import (
    analytic_gaussian_sigma,
    certified_epsilon,
    classic_gaussian_sigma,
)
from privpca.pipeline.budget import BudgetPlan

SRC = pathlib.Path(privpca.__file__).parent
HOME = "accounting/calibration.py"

#: dp-accounting's calibration helpers: σ from (ε, δ), ε from σ, and the search of a noise
#: parameter against an accountant. Accounting that composes events (PLDs, RDP) is not banned.
DP_ACCOUNTING_CALIBRATIONS = frozenset(
    {"get_sigma_gaussian", "get_epsilon_gaussian", "calibrate_dp_mechanism"})
#: scipy.optimize's scalar root finders: an inverse search for a noise scale is one of these.
ROOT_FINDERS = frozenset(
    {"brentq", "brenth", "bisect", "ridder", "toms748", "newton", "root_scalar", "fsolve"})
#: Packages whose root finders would be solving privacy functions. Elsewhere (solvers/, audit/)
#: they solve numerical equations that have nothing to do with a privacy target.
PRIVACY_PACKAGES = ("mechanisms/", "accounting/", "pipeline/", "local_protocol/", "decomposition/",
                    "federated/")
#: Root finders in those packages that solve no privacy function, and why.
NOT_PRIVACY = {
    # Kent-Ganeiber-Mardia's proposal parameter b: Σ 1/(b + 2aᵢ) = 1 (a sampler's tuning).
    ("mechanisms/bingham_sampler.py", "brentq"),
    # Feldman-McMillan-Talwar's shuffling bound inverted for the local ε₀: a theorem's privacy
    # parameter, not a noise scale; its own module states and tests it (tests/test_shuffling.py).
    ("mechanisms/shuffling.py", "brentq"),
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def calibration_formulas(source: str, relpath: str) -> list[str]:
    """Where ``source`` (the file ``relpath`` under privpca/) writes a calibration itself."""
    if relpath == HOME:
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        line = f"{relpath}:{getattr(node, 'lineno', 0)}"
        # The classic Gaussian calibration σ = Δ√(2 ln(1.25/δ))/ε: log(1.25 / δ) in code (a
        # docstring may state it).
        if (isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "log"
                and node.args and isinstance(node.args[0], ast.BinOp)
                and isinstance(node.args[0].op, ast.Div)
                and isinstance(node.args[0].left, ast.Constant)
                and node.args[0].left.value == 1.25):
            found.append(f"{line}: classic Gaussian log(1.25 / delta)")
        # dp-accounting's calibration helpers, called or imported.
        if isinstance(node, ast.Attribute) and node.attr in DP_ACCOUNTING_CALIBRATIONS:
            found.append(f"{line}: dp_accounting.{node.attr}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dp_accounting"):
            found += [f"{line}: dp_accounting.{a.name}" for a in node.names
                      if a.name in DP_ACCOUNTING_CALIBRATIONS]
        # scipy's root finders in a package that handles privacy parameters.
        if relpath.startswith(PRIVACY_PACKAGES):
            names = []
            if isinstance(node, ast.Attribute) and node.attr in ROOT_FINDERS \
                    and _dotted(node.value).endswith("optimize"):
                names = [node.attr]
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "scipy.optimize"):
                names = [a.name for a in node.names if a.name in ROOT_FINDERS]
            found += [f"{line}: scipy.optimize.{name} (an inverse search)" for name in names
                      if (relpath, name) not in NOT_PRIVACY]
    return found


def test_calibrations_are_written_only_in_the_calibration_module():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relpath = path.relative_to(SRC).as_posix()
        found += calibration_formulas(path.read_text(encoding="utf-8"), relpath)
    assert not found, ("Calibrations belong in privpca/accounting/calibration.py; import them "
                       "from there:\n" + "\n".join(found))


@pytest.mark.parametrize(("source", "relpath"), [
    ("import math\ns = d * math.sqrt(2.0 * math.log(1.25 / delta)) / eps\n", "plot.py"),
    ("import numpy as np\ns = np.sqrt(2 * np.log(1.25 / delta)) / eps\n", "plot.py"),
    ("import dp_accounting\nm = dp_accounting.get_sigma_gaussian(1.0, 1e-5)\n",
     "decomposition/x.py"),
    ("from dp_accounting import get_epsilon_gaussian\n", "accounting/x.py"),
    ("import scipy.optimize\nb = scipy.optimize.brentq(f, 0.0, 1.0)\n", "mechanisms/x.py"),
    ("from scipy.optimize import root_scalar\n", "pipeline/x.py"),
])
def test_the_scan_sees_a_calibration(source, relpath):
    assert calibration_formulas(source, relpath)


@pytest.mark.parametrize(("source", "relpath"), [
    ('"""σ = Δ·√(2 ln(1.25/δ))/ε, written in a docstring."""\n', "plot.py"),
    ("import math\nr = math.sqrt(2.0 * math.log(1.0 / alpha))\n", "pipeline/x.py"),
    ("import bisect\ni = bisect.bisect(edges, x)\n", "mechanisms/x.py"),
    ("import scipy.optimize\nb = scipy.optimize.brentq(f, 0.0, 1.0)\n", "solvers/x.py"),
    ("import dp_accounting\ne = dp_accounting.GaussianDpEvent(2.0)\n", "decomposition/x.py"),
    ("import dp_accounting\nm = dp_accounting.get_sigma_gaussian(1.0, 1e-5)\n", HOME),
])
def test_the_scan_leaves_other_code_alone(source, relpath):
    assert not calibration_formulas(source, relpath)


# ------------------------------------------------------------------------ closed forms


def _balle_wang_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Balle & Wang 2018, Theorem 8, written out directly (no log space)."""
    a, b = sensitivity / (2.0 * sigma), epsilon * sigma / sensitivity
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


def test_classic_gaussian_closed_form():
    assert cal.classic_sigma(1.0, 1e-5) == pytest.approx(math.sqrt(2 * math.log(1.25e5)),
                                                         rel=1e-15)
    assert cal.classic_sigma(0.5, 1e-6, 3.0) == pytest.approx(
        3.0 * math.sqrt(2 * math.log(1.25e6)) / 0.5, rel=1e-15)
    # The checked front door returns the module's value bit for bit, and warns at ε ≥ 1.
    assert classic_gaussian_sigma(0.5, 1e-6, 3.0) == cal.classic_sigma(0.5, 1e-6, 3.0)
    with pytest.warns(PrivacyLeakWarning):
        assert classic_gaussian_sigma(1.0, 1e-5) == cal.classic_sigma(1.0, 1e-5)


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity"),
                         [(0.1, 1e-5, 1.0), (1.0, 1e-5, 1.0), (1.0, 1e-8, 2.5), (4.0, 1e-6, 0.3)])
def test_analytic_gaussian_gives_exactly_delta(epsilon, delta, sensitivity):
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    assert sigma == cal.analytic_multiplier(epsilon, delta) * sensitivity
    assert _balle_wang_delta(sigma, epsilon, sensitivity) == pytest.approx(delta, rel=1e-10)
    assert cal.analytic_gaussian_delta(sigma, epsilon, sensitivity) == pytest.approx(
        delta, rel=1e-10)
    assert _balle_wang_delta(sigma * (1 - 1e-6), epsilon, sensitivity) > delta  # the smallest
    if epsilon < 1:
        assert sigma < cal.classic_sigma(epsilon, delta, sensitivity)
    # ε from σ inverts it.
    assert certified_epsilon(sigma, delta, sensitivity) == pytest.approx(epsilon, rel=1e-9)
    assert cal.certified_epsilon(sigma / sensitivity, delta) == pytest.approx(epsilon, rel=1e-9)


def test_gaussian_composition_and_shares():
    m1 = cal.analytic_multiplier(1.0, 1e-5)
    assert cal.composed_gaussian_multiplier(1.0, 1e-5, 1) == m1
    assert cal.composed_gaussian_multiplier(1.0, 1e-5, 10) == m1 * math.sqrt(10)
    with pytest.raises(ValueError, match="positive int"):
        cal.composed_gaussian_multiplier(1.0, 1e-5, 0)
    # Shares of 1/m² (zCDP's ρ), each part released count times, compose back to m exactly.
    shares, counts = (0.1, 0.3, 0.6), (1, 4, 1)
    parts = [cal.share_multiplier(m1, w, c) for w, c in zip(shares, counts, strict=True)]
    assert sum(c / m**2 for m, c in zip(parts, counts, strict=True)) ** -0.5 == pytest.approx(
        m1, rel=1e-12)
    assert cal.share_multiplier(m1) == m1
    # The pipeline's statistic alone gets the analytic multiplier bit for bit.
    plan = BudgetPlan.split(1.0, 1e-5, ())
    assert plan["statistic"].multiplier == m1
    assert plan["statistic"].multiplier == float(dp_accounting.get_sigma_gaussian(1.0, 1e-5))


def test_laplace_closed_form_and_composed_search():
    assert cal.laplace_scale(0.5) == 2.0
    assert cal.laplace_scale(0.5, 3.0) == 6.0
    assert cal.composed_laplace_scale(0.7, 1e-6, 1, compose_epsilon) == 1 / 0.7
    b = cal.composed_laplace_scale(1.0, 1e-6, 40, compose_epsilon)
    assert b < 40 / 1.0  # composition beats the basic bound ...
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(b), 40)
    assert compose_epsilon([event], 1e-6) <= 1.0  # ... and still certifies (ε, δ)
    tighter = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(b / 1.01), 40)
    assert compose_epsilon([tighter], 1e-6) > 1.0  # within the bisection's 0.1 %


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 8.0])
def test_histogram_tails_and_unary_encoding(epsilon):
    delta, f = 1e-6, 0.5
    closed = f * delta / (1 + math.exp(epsilon))
    assert cal.threshold_tail(epsilon, delta, f) == pytest.approx(closed, rel=1e-14)
    tail, delta_noise = cal.split_tail(epsilon, delta, f)
    assert tail == pytest.approx(closed, rel=1e-14)
    assert delta_noise == pytest.approx((1 - f) * delta, rel=1e-12)
    assert delta_noise + (1 + math.exp(epsilon)) * tail == pytest.approx(delta, rel=1e-14)
    q = cal.unary_encoding_flip_probability(epsilon)
    assert (1 - q) / q == pytest.approx(math.exp(epsilon), rel=1e-12)  # ε-LDP exactly
    with pytest.raises(ValueError, match="too large"):
        cal.threshold_tail(800.0, delta, f)
