"""The held-out layout's cost: a secret random set of single rows against whole segments.

The held-out share of a fit (the release pipeline from 10⁷ rows on, the Oja family on defaults)
is a uniformly random set of single rows (:mod:`privpca.streaming.holdout`): private whatever
the row order, but the rows lie everywhere, so a streamed table is read once to gather them
(then the preprocessing passes read memory) and once for the statistic, with the held-out
rows removed block by block. The layout before, whole segments of consecutive rows, read only
the segments for each preprocessing pass (about 1.06 table reads at 2 %), but is not private
on a table sorted by a feature. This script times both in the same run, on the same tables:
the old layout is reproduced here (segments of ``⌊n/S⌋`` rows, read as row ranges), by
standing in for the split and the two selections that the fits import when they run.

Cases: ``AnalyzeGaussPCA(holdout_fraction=0.02)`` on an in-memory float64 table, a ``.npy``
memory map and an uncompressed Zarr store (float32 on disk), and ``DPPCA()`` on defaults
(a 10 % held-out share) on the memory map and the Zarr store; ``n`` rows × ``p`` columns. The
on-disk tables are written once to ``--dir`` (kept with ``--keep``) and read through the page
cache when they fit in memory (at 10⁷ × 20 float32, 0.8 GB each): the figures are then the
CPU cost of the layouts, not of the disk. ``--cold`` times the Zarr cases with every pass
over the store read from the disk (the store, and only it, evicted from the page cache before
each pass), as for a table larger than memory. Each case runs
``--rounds`` times, the layouts interleaved, after a warm-up; the median is reported with the
ratio new/old.

Run: ``python benchmarks/bench_holdout_layout.py`` (``--rows 10000000 --features 20``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import privpca.streaming.holdout as holdout
import privpca.streaming.selection as selection
import privpca.streaming.sources as sources
from privpca import DPPCA, AnalyzeGaussPCA, PrivacyLedger
from privpca.streaming.holdout import RowSplit


def _segment_split(n: int, fraction: float, rng: np.random.Generator,
                   segments: int) -> RowSplit:
    """The layout before: ``h = ⌈fraction·S⌉`` of ``S = min(n, segments)`` segments of
    ``⌊n/S⌋`` rows, drawn uniformly (as ``segment_split`` drew them)."""
    S = min(n, segments)
    size = n // S
    h = min(math.ceil(fraction * S), S)
    chosen = np.sort(rng.choice(S, size=h, replace=False))
    held = (chosen[:, None] * size + np.arange(size)).ravel().astype(np.int64)
    return RowSplit(n, held)


def _runs(rows: np.ndarray, n: int, complement: bool) -> list[tuple[int, int]]:
    """The maximal runs of ``rows`` (sorted), or of the other rows of ``range(n)``."""
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    if complement:
        mask = ~mask
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


@contextlib.contextmanager
def segment_layout(segments: int) -> Iterator[None]:
    """Within the block, fits hold out whole segments and read them as row ranges (the old
    ``select_rows`` views: each preprocessing pass reads the segments in place)."""
    saved = holdout.random_row_split, selection.take_rows, selection.drop_rows

    def split(n: int, fraction: float, rng: np.random.Generator) -> RowSplit:
        return _segment_split(n, fraction, rng, segments)

    def take(source: Any, rows: np.ndarray) -> Any:
        return selection.select_rows(source, _runs(rows, source.n_samples, False))

    def drop(source: Any, rows: np.ndarray) -> Any:
        return selection.select_rows(source, _runs(rows, source.n_samples, True))

    holdout.random_row_split = split
    selection.take_rows = take
    selection.drop_rows = drop
    try:
        yield
    finally:
        holdout.random_row_split, selection.take_rows, selection.drop_rows = saved


def _table(n: int, p: int) -> np.ndarray:
    """Shifted rows with a rank-2 signal, float64, built block by block."""
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.standard_normal((p, 2)))[0]
    out = np.empty((n, p))
    for a in range(0, n, 1_000_000):
        b = min(a + 1_000_000, n)
        z = rng.standard_normal((b - a, p))
        z += (rng.standard_normal((b - a, 2)) * [3.0, 2.0]) @ basis.T
        out[a:b] = z + np.linspace(0.0, 50.0, p)
    return out


def _write(X: np.ndarray, folder: Path) -> tuple[Path, Path]:
    import zarr

    npy = folder / "table.npy"
    store = folder / "table.zarr"
    if not npy.exists():
        out = np.lib.format.open_memmap(npy, mode="w+", dtype=np.float32, shape=X.shape)
        for a in range(0, X.shape[0], 1_000_000):
            out[a:a + 1_000_000] = X[a:a + 1_000_000]
        out.flush()
        del out
    if not store.exists():
        z = zarr.create_array(store, shape=X.shape, chunks=(10_000, X.shape[1]),
                              dtype=np.float32, compressors=None)
        for a in range(0, X.shape[0], 1_000_000):
            z[a:a + 1_000_000] = X[a:a + 1_000_000].astype(np.float32)
    return npy, store


def _evict(paths: list[Path]) -> None:
    """Drop these files' pages from the page cache (``posix_fadvise(DONTNEED)``: only these
    files, nothing else on the machine), so that the next fit reads them from the disk."""
    gc.collect()  # a memory map still open keeps its pages
    for root in paths:
        files = [root] if root.is_file() else [f for f in root.rglob("*") if f.is_file()]
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


@contextlib.contextmanager
def every_pass_from_disk(store: Path) -> Iterator[None]:
    """Within the block, every pass over the Zarr store first evicts it from the page cache:
    each pass reads the disk, as for a table larger than memory (a memory map cannot be
    emulated so: the pages of a mapped file stay cached while it is mapped)."""
    threaded = sources._threaded_reduce
    views = {cls: cls.blocks for cls in (sources.ArraySource, selection.RowRanges,
                                         selection.RowsExcept)}

    def reads_store(source: Any) -> bool:
        source = getattr(source, "parent", source)
        return getattr(source, "direct", None) is not None

    def threaded_cold(array: Any, *args: Any, **kwargs: Any) -> Any:
        if reads_store(array):
            _evict([store])
        return threaded(array, *args, **kwargs)

    def blocks_cold(cls: Any) -> Callable[[Any], Any]:
        def blocks(self: Any) -> Any:
            if reads_store(self):
                _evict([store])
            return views[cls](self)
        return blocks

    # Both modules hold the name (selection imports it from sources).
    sources._threaded_reduce = selection._threaded_reduce = threaded_cold
    for cls in views:
        cls.blocks = blocks_cold(cls)
    try:
        yield
    finally:
        sources._threaded_reduce = selection._threaded_reduce = threaded
        for cls, original in views.items():
            cls.blocks = original


def _timed(make: Callable[[], Any], fit: Callable[[Any], Any],
           cold: list[Path] | None = None) -> float:
    X = make()
    if cold:
        with every_pass_from_disk(cold[0]):
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit(X)
            return time.perf_counter() - t0
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit(X)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--skip-dppca", action="store_true")
    parser.add_argument("--cold", action="store_true",
                        help="the Zarr cases only, every pass over the store read from the "
                             "disk (evicted from the page cache first)")
    args = parser.parse_args()
    n, p = args.rows, args.features
    if n % 10_000:
        parser.error("--rows must be a multiple of 10 000 (the old layout's segments then hold "
                     "exactly ⌈fraction·n⌉ rows, as the fits expect)")
    folder = args.dir or Path(tempfile.mkdtemp(prefix="holdout_layout_"))
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    X = _table(n, p)
    npy, store = _write(X, folder)
    print(f"{n:,} x {p} rows (float64 in memory, float32 on disk in {folder}); tables ready in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)

    def analyze(data: Any) -> Any:
        return AnalyzeGaussPCA(2, epsilon=1.0, holdout_fraction=0.02, random_state=1,
                               ledger=PrivacyLedger()).fit(data)

    def dppca(data: Any) -> Any:
        return DPPCA(2, epsilon=1.0, random_state=1, ledger=PrivacyLedger()).fit(data)

    def memmap() -> Any:
        return np.load(npy, mmap_mode="r")

    def zarr_path() -> Any:
        return str(store)

    # (name, table, fit, segments of the old layout: the pipeline's 10 000, Oja family's 1 000,
    # the files to evict with --cold)
    cases: list[tuple[str, Callable[[], Any], Callable[[Any], Any], int, list[Path]]] = [
        ("AnalyzeGaussPCA 2 %, in memory", lambda: X, analyze, 10_000, []),
        ("AnalyzeGaussPCA 2 %, .npy memory map", memmap, analyze, 10_000, [npy]),
        ("AnalyzeGaussPCA 2 %, Zarr store", zarr_path, analyze, 10_000, [store]),
    ]
    if not args.skip_dppca:
        cases += [("DPPCA defaults (10 %), .npy memory map", memmap, dppca, 1_000, [npy]),
                  ("DPPCA defaults (10 %), Zarr store", zarr_path, dppca, 1_000, [store])]
    if args.cold:
        cases = [case for case in cases if "Zarr" in case[0]]
    print(f"{'case':<42} {'segments (old)':>15} {'random rows':>12} {'ratio':>6}"
          + ("   (from the disk)" if args.cold else ""), flush=True)
    for name, make, fit, segments, files in cases:
        cold = files if args.cold else None
        with segment_layout(segments):
            _timed(make, fit)  # warm-up: page cache, compiled kernels
        _timed(make, fit)
        old, new = [], []
        for _ in range(args.rounds):
            with segment_layout(segments):
                old.append(_timed(make, fit, cold))
            new.append(_timed(make, fit, cold))
        o, w = statistics.median(old), statistics.median(new)
        print(f"{name:<42} {o:>13.2f} s {w:>10.2f} s {w / o:>6.2f}"
              f"   (rounds old {', '.join(f'{t:.2f}' for t in old)}; "
              f"new {', '.join(f'{t:.2f}' for t in new)})", flush=True)
    # The two parts of the new layout on its own, on the memory map: the gathering pass and
    # the statistic's pass over the rest (blocks less their held-out rows), against a pass
    # over all the rows.
    from privpca.streaming.holdout import random_row_split
    from privpca.streaming.selection import drop_rows, take_rows
    from privpca.streaming.sources import as_row_source

    source = as_row_source(np.load(npy, mmap_mode="r"))
    held = random_row_split(n, 0.02, np.random.default_rng(0)).held
    for label, run in [("gather 2 % (take_rows), memory map",
                        lambda: take_rows(source, held)),
                       ("sum of all rows, memory map",
                        lambda: source.reduce(lambda b: b.sum(axis=0), np.add, raw=True)),
                       ("sum of the other 98 % (drop_rows), memory map",
                        lambda: drop_rows(source, held).reduce(lambda b: b.sum(axis=0),
                                                               np.add, raw=True))]:
        times = []
        for _ in range(args.rounds + 1):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        print(f"{label:<48} {statistics.median(times[1:]):.2f} s", flush=True)
    if not args.keep and args.dir is None:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
