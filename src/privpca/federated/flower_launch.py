"""The Flower App directory that ``flwr run`` launches privpca's server and provider apps from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_PYPROJECT = """[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "privpca-dpspca"
version = "1.0.0"
description = "DPS-PCA (Ge et al. 2018) server and provider apps of privpca"
license = "BSD-3-Clause"
dependencies = []

[tool.flwr.app]
publisher = "privpca"

[tool.flwr.app.components]
serverapp = "privpca.federated.flower_app:server_app"
clientapp = "privpca.federated.flower_app:client_app"

[tool.flwr.app.config]
{config}
"""


def write_app_dir(path: str | Path, run_config: dict[str, Any]) -> Path:
    """Write the Flower App directory (a ``pyproject.toml`` naming privpca's apps) for ``flwr run``.

    The apps' code is privpca itself, which must be installed (``privpca[federated]``) where
    the SuperLink and the SuperNodes run; the app directory only carries the run config.
    """
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for key, value in run_config.items():
        lines.append(f"{key} = {json.dumps(value)}")
    (out / "pyproject.toml").write_text(_PYPROJECT.format(config="\n".join(lines)))
    return out
