"""A new process's first fit, beside scikit-learn's PCA (issue 29: no wait at the first fit).

Every measurement is a fresh Python process that imports the estimator's module, builds a
20 000 × 20 standard normal table and fits once; it reports the import and the fit
separately. Three cache states of numba's compiled kernels:

* ``cold``: an empty ``NUMBA_CACHE_DIR`` per process (a new install's very first fit, or one
  where no cache can be written at all);
* ``warm``: a ``NUMBA_CACHE_DIR`` filled by one earlier process (every later fit on that
  install);
* ``readonly``: the package copied into a read-only directory, ``NUMBA_CACHE_DIR`` unset and
  ``HOME`` a fresh directory (run as user ``nobody`` when the benchmark runs as root, whom
  mode bits do not stop): the first process and a second one, showing where numba puts
  its cache when the source tree cannot be written (it falls back to a user-wide directory,
  ``$HOME/.cache/numba`` on Linux), so only the first process per user compiles.

Usage::

    python benchmarks/bench_first_fit.py [--repeats 3] [--n 20000] [--p 20] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
name = sys.argv[1]
if name == "sklearn.PCA":
    from sklearn.decomposition import PCA as Est
    make = lambda: Est(2)
else:
    import privpca.decomposition as dec
    Est = getattr(dec, name)
    kw = {"epsilon": 1.0}
    if name == "DPPCA":
        kw["delta"] = 1e-6
    make = lambda: Est(2, **kw)
t1 = time.perf_counter()
import numpy as np
X = np.random.default_rng(0).standard_normal((int(sys.argv[2]), int(sys.argv[3])))
t2 = time.perf_counter()
make().fit(X)
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "fit": t3 - t2,
                  "numba": "numba" in sys.modules}))
"""

ESTIMATORS = ["sklearn.PCA", "AnalyzeGaussPCA", "DPPCA", "BinghamPCA", "NoisyPowerPCA"]


_NOBODY = 65534


def _run(name: str, n: int, p: int, env: dict[str, str], src: Path,
         as_nobody: bool = False) -> dict[str, float]:
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(src),
                                                             env.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-c", _CHILD, name, str(n), str(p)]
    if as_nobody:  # root writes through any mode bits: drop to an unprivileged user
        cmd = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups", *cmd]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _summary(runs: list[dict[str, float]]) -> str:
    fit = [r["fit"] for r in runs]
    tot = [r["import"] + r["fit"] for r in runs]
    return (f"fit min {min(fit):6.2f} med {statistics.median(fit):6.2f}   "
            f"import+fit min {min(tot):6.2f} med {statistics.median(tot):6.2f}   "
            f"numba {'yes' if any(r['numba'] for r in runs) else 'no '}")


def _readonly(name: str, n: int, p: int, base_env: dict[str, str], package: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(package, src, ignore=shutil.ignore_patterns("__pycache__"))
        for path in [src, *src.rglob("*")]:
            mode = path.stat().st_mode
            path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        home = Path(tmp) / "home"
        home.mkdir()
        as_nobody = os.geteuid() == 0
        if as_nobody:
            Path(tmp).chmod(0o755)
            os.chown(home, _NOBODY, _NOBODY)
        env = {k: v for k, v in base_env.items() if k != "NUMBA_CACHE_DIR"}
        env["HOME"] = str(home)
        env.pop("XDG_CACHE_HOME", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        first = _run(name, n, p, env, src, as_nobody)
        second = _run(name, n, p, env, src, as_nobody)
        cached = sorted({str(f.parent.relative_to(home)) for f in home.rglob("*.nbi")})
        in_tree = list(src.rglob("*.nbi"))
        for path in [src, *src.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        return (f"first fit {first['fit']:6.2f}  second process {second['fit']:6.2f}   "
                f"cache files in tree: {len(in_tree)}, under $HOME: "
                f"{', '.join(cached) if cached else 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--p", type=int, default=20)
    ap.add_argument("--only", nargs="*", default=ESTIMATORS)
    ap.add_argument("--src", default=str(ROOT / "src"), help="the package to time")
    ap.add_argument("--no-readonly", action="store_true")
    args = ap.parse_args()
    src = Path(args.src)
    base_env = dict(os.environ)
    print(f"first fit in a fresh process, {args.n} x {args.p} standard normal, "
          f"{args.repeats} processes each (seconds)")
    for name in args.only:
        with tempfile.TemporaryDirectory() as warm_dir:
            cold = []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as empty:
                    cold.append(_run(name, args.n, args.p,
                                     {**base_env, "NUMBA_CACHE_DIR": empty}, src))
            env = {**base_env, "NUMBA_CACHE_DIR": warm_dir}
            _run(name, args.n, args.p, env, src)  # fills the cache
            warm = [_run(name, args.n, args.p, env, src) for _ in range(args.repeats)]
        print(f"{name:16s} cold  {_summary(cold)}")
        print(f"{'':16s} warm  {_summary(warm)}")
        if not args.no_readonly and name != "sklearn.PCA":
            print(f"{'':16s} read-only install: {_readonly(name, args.n, args.p, base_env, src)}")


if __name__ == "__main__":
    main()
