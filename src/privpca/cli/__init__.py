"""The ``privpca`` command line: ``demo``, ``fit``, ``reproduce``, ``audit``, and DPS-PCA's
``provider`` and ``server``.

One module per job: :mod:`~privpca.cli.tables` reads the input tables,
:mod:`~privpca.cli.options` holds the option types, :mod:`~privpca.cli.payload` the JSON of a
fit, :mod:`~privpca.cli.scores` the private score plot's release, JSON and summary lines,
:mod:`~privpca.cli.refusals` how a refusal is said; :mod:`~privpca.cli.fit`,
:mod:`~privpca.cli.experiments` (``demo``, ``reproduce``) and :mod:`~privpca.cli.federated`
(``provider``, ``server``) are the commands; ``audit`` lives in :mod:`privpca.audit.cli`.
This module builds the group, :func:`main`, the console script.
"""

from __future__ import annotations

import warnings

import click

from privpca import __version__
from privpca._registry import PRIVATE_ESTIMATORS as PRIVATE_ESTIMATORS  # re-exported (tests)
from privpca.audit.cli import audit_command
from privpca.cli.experiments import demo, reproduce
from privpca.cli.federated import provider, server
from privpca.cli.fit import fit
from privpca.cli.payload import _fit_payload as _fit_payload  # re-exported (tests)

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="privpca")
def main() -> None:
    """Principal component analysis under differential privacy."""
    # A warning in the shell names its kind and says what to do; the file and line it was
    # raised from (privpca's or click's own) mean nothing to a person at a prompt.
    previous = warnings.formatwarning
    warnings.formatwarning = _shell_warning
    click.get_current_context().call_on_close(
        lambda: setattr(warnings, "formatwarning", previous))


def _shell_warning(message: Warning | str, category: type[Warning], filename: str,
                   lineno: int, line: str | None = None) -> str:
    return f"warning: {category.__name__}: {message}\n"


for _command in (demo, fit, provider, server, reproduce, audit_command):
    main.add_command(_command)
