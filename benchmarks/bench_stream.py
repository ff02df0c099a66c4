"""Streamed private fits against Dask's own ``X.T @ X`` on the same on-disk table.

Writes an n × p float32 table (shifted, mixed units) to disk as ``.npy`` (memory-mapped),
an uncompressed Zarr store (``--zarr-chunk-rows`` rows per chunk) or Parquet, then prints,
side by side in one run, rows per second and peak Python-heap memory (``tracemalloc``; the
OS page cache is not counted) of:

* Dask's ``(X.T @ X).compute()`` — the reduction itself, the physical limit here — as it runs
  by default, with one BLAS thread per task, and with one BLAS thread per task and two
  threads per core, as the fits run (the ratios use the fastest of the three); for Zarr
  also on the fits' own reader (``dask_table``, which reads an uncompressed store's chunk
  files straight into each block: ``privpca.streaming.zarr_rows``), a third ratio;
* ``AnalyzeGaussPCA`` on defaults on the same Dask array (from 10⁷ rows the defaults hold out
  2 % of the rows for the private mean and bound, ``holdout_fraction="auto"``: three passes
  over those rows, then one over the rest; ``--whole-table`` adds the whole-table layout,
  ``holdout_fraction=None``: four passes over every row);
* ``AnalyzeGaussPCA`` in the papers' setting (public bound, uncentred: the Gram alone);
* ``AnalyzeGaussPCA`` on defaults reading the memory map or the Zarr store directly (no Dask);

and the ratios to the Dask Gram. ``--rows 100000000`` gives 40 GB at p = 100, more than this
machine's memory (so every pass reads the disk); the script checks the free disk first.

Disk throughput drifts from pass to pass on a shared machine: ``--rounds R`` runs every case
R times, interleaved, and the ratios use the medians.

Run: ``python benchmarks/bench_stream.py --rows 10000000`` (add ``--format zarr`` or
``--format parquet``, ``--keep`` to keep the file, ``--dir`` to choose where it is written).
Zarr's chunks and Parquet's row groups default to n/10 000 rows (at least 1 000), the held-out
layout's segment: each held-out segment is then whole chunks or groups, and its passes read
only those.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privpca import AnalyzeGaussPCA, PrivacyLedger

POOL_ROWS = 1 << 20


def write_table(path: Path, n: int, p: int, fmt: str, block: int, zarr_rows: int) -> Path:
    """Write the benchmark's table. Its rows are windows, at random offsets, of a pool of
    2²⁰ mixed Gaussian rows, each window shifted by its own random vector: generating 10⁸
    fresh rows would take longer than every timed pass together (the values do not affect
    the throughput, only the bytes on disk do)."""
    rng = np.random.default_rng(0)
    scales = np.geomspace(0.1, 10.0, p).astype(np.float32)
    shifts = np.linspace(0.0, 100.0, p).astype(np.float32)
    mix = rng.standard_normal((p, p)).astype(np.float32) / np.sqrt(p)
    z = rng.standard_normal((min(n, POOL_ROWS), p), dtype=np.float32)
    pool = (z + z @ mix) * scales + shifts
    del z

    def rows(m: int) -> np.ndarray:
        reps = -(-m // len(pool))
        base = pool if reps == 1 else np.concatenate([pool] * reps)
        offset = int(rng.integers(0, len(base) - m + 1))
        jitter = (rng.standard_normal(p).astype(np.float32) * scales * np.float32(0.5))
        return base[offset:offset + m] + jitter

    if fmt == "zarr":
        import zarr

        target = path / "table.zarr"
        # Uncompressed: Gaussian floats barely compress, and decoding would add CPU to both
        # sides of the comparison.
        out = zarr.create_array(target, shape=(n, p), chunks=(zarr_rows, p),
                                dtype=np.float32, compressors=None)
        step = zarr_rows * max(1, block // zarr_rows)  # whole chunks per write
        for start in range(0, n, step):
            stop = min(start + step, n)
            out[start:stop] = rows(stop - start)
        return target
    if fmt == "npy":
        target = path / "table.npy"
        out = np.lib.format.open_memmap(target, mode="w+", dtype=np.float32, shape=(n, p))
        for start in range(0, n, block):
            stop = min(start + block, n)
            out[start:stop] = rows(stop - start)
        out.flush()
        del out
        return target
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = path / "table"
    folder.mkdir()
    for i, start in enumerate(range(0, n, block * 8)):
        stop = min(start + block * 8, n)
        x = rows(stop - start)
        pq.write_table(pa.table({f"x{j}": x[:, j] for j in range(p)}),
                       folder / f"part-{i:05d}.parquet", row_group_size=zarr_rows)
    return folder


def dask_array(target: Path, fmt: str, block: int) -> Any:
    if fmt in ("npy", "zarr"):
        # Each block read by the task that uses it: dask.array.from_array copies a memory
        # map into memory first (all 37 GiB at 10^8 rows). Zarr: whole chunks per block.
        from privpca.streaming.dask_io import dask_table

        return dask_table(target, chunk_rows=block)
    import dask.dataframe as dd

    return dd.read_parquet(target).to_dask_array(lengths=True)


def timed(func: Callable[[], Any]) -> tuple[float, float]:
    tracemalloc.start()
    start = time.perf_counter()
    func()
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--format", choices=("npy", "zarr", "parquet"), default="npy")
    parser.add_argument("--block", type=int, default=131_072, help="rows per chunk")
    parser.add_argument("--zarr-chunk-rows", type=int, default=None,
                        help="rows per Zarr chunk or Parquet row group (default: n/10 000, "
                        "at least 1 000)")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--whole-table", action="store_true",
                        help="also time the defaults with holdout_fraction=None (dask)")
    parser.add_argument("--pinned-gram-only", action="store_true",
                        help="time Dask's Gram with one BLAS thread per task only (its "
                        "default threading can be several times slower on a busy machine)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved rounds of every case; the ratios use the medians")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="an existing table (.npy or Parquet folder) instead of writing one")
    args = parser.parse_args()

    n, p = args.rows, args.cols
    size = n * p * 4
    base = args.dir or Path(tempfile.gettempdir())
    free = shutil.disk_usage(base).free
    if args.reuse is not None:
        size = 0
    if free < 1.2 * size:
        raise SystemExit(f"Need {1.2 * size / 2**30:.1f} GiB free in {base}; "
                         f"{free / 2**30:.1f} GiB are.")
    work = Path(tempfile.mkdtemp(dir=base, prefix="privpca-stream-"))
    try:
        if args.reuse is not None:
            target = args.reuse
            if args.format == "npy":
                n, p = np.load(target, mmap_mode="r").shape
            elif args.format == "zarr":
                from privpca.streaming import open_zarr

                n, p = open_zarr(target).shape
            print(f"Reusing {target} ({n:,} x {p})", flush=True)
        else:
            print(f"Writing {n:,} x {p} float32 ({size / 2**30:.1f} GiB) as {args.format} "
                  f"to {work} ...", flush=True)
            t0 = time.perf_counter()
            zarr_rows = args.zarr_chunk_rows or max(1_000, n // 10_000)
            target = write_table(work, n, p, args.format, args.block, zarr_rows)
            print(f"  written in {time.perf_counter() - t0:.1f} s")
        print(f"  load average {os.getloadavg()[0]:.2f}", flush=True)
        X = dask_array(target, args.format, args.block)
        ledger = PrivacyLedger()
        norm = float(np.sqrt(p) * 150.0)  # a public bound above every row of this table

        def fit(**kw: Any) -> Callable[[], Any]:
            def run() -> None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    AnalyzeGaussPCA(2, random_state=0, ledger=ledger, **kw).fit(X)
            return run

        if args.format == "zarr":
            import dask.array as da

            # Dask's own reader, the same blocks (whole Zarr chunks) as the fits read.
            G = da.from_zarr(str(target), chunks=(X.chunks[0][0], p))
        else:
            G = X

        def gram_one_blas_thread() -> None:
            # As Dask's distributed workers run (one BLAS thread per task), and as the fits
            # run their blocks: no oversubscription of the cores by BLAS's own threads.
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1, user_api="blas"):
                (G.T @ G).compute()

        def gram_more_threads() -> None:
            # As the fits run Dask's local scheduler: two threads per core, so that reads
            # overlap the arithmetic (privpca.streaming.sources.READ_THREADS_PER_CORE).
            import dask
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1, user_api="blas"), dask.config.set(
                    num_workers=2 * (os.cpu_count() or 1)):
                (G.T @ G).compute()

        def gram_same_reader() -> None:
            # The fits' own Dask array (dask_table: a Zarr store's chunk files read straight
            # into each block), threaded as the fits run: the arithmetic alone differs.
            import dask
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1, user_api="blas"), dask.config.set(
                    num_workers=2 * (os.cpu_count() or 1)):
                (X.T @ X).compute()

        gram = ("dask (X.T @ X).compute()", lambda: (G.T @ G).compute())
        cases: list[tuple[str, Callable[[], Any]]] = [
            *([] if args.pinned_gram_only else [gram]),
            ("dask (X.T @ X), one BLAS thread per task", gram_one_blas_thread),
            ("dask (X.T @ X), 1 BLAS thread, 2 per core", gram_more_threads),
            *([("X.T @ X on the fits' reader (dask_table)", gram_same_reader)]
              if args.format == "zarr" else []),
            ("AnalyzeGaussPCA defaults (dask)", fit()),
            ("AnalyzeGaussPCA papers' setting (dask)", fit(centering=None, data_norm=norm)),
        ]
        if args.whole_table:
            cases.append(("AnalyzeGaussPCA defaults, whole table (dask)",
                          fit(holdout_fraction=None)))
        if args.format in ("npy", "zarr"):
            direct: Any = np.load(target, mmap_mode="r") if args.format == "npy" else target

            def direct_fit() -> None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    AnalyzeGaussPCA(2, random_state=0, ledger=ledger).fit(direct)
            label = "memmap" if args.format == "npy" else "Zarr, no Dask"
            cases.append((f"AnalyzeGaussPCA defaults ({label})", direct_fit))
        # Compile the pipeline's numba kernels first (once per process; not a pass over X).
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warm = np.random.default_rng(1).standard_normal((20_000, p)) + 5.0
            AnalyzeGaussPCA(2, random_state=0, ledger=PrivacyLedger()).fit(warm)
            AnalyzeGaussPCA(2, random_state=0, holdout_fraction=0.05,
                            ledger=PrivacyLedger()).fit(warm)
        print(f"  warm-up (numba compilation, small in-memory fits) "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        runs: dict[str, list[float]] = {name: [] for name, _ in cases}
        for r in range(args.rounds):
            if args.rounds > 1:
                print(f"  round {r + 1} of {args.rounds}", flush=True)
            for name, func in cases:
                seconds, peak = timed(func)
                runs[name].append(seconds)
                print(f"  {name:<42} {seconds:8.1f} s  {n / seconds / 1e6:7.2f} M rows/s  "
                      f"peak heap {peak:8.1f} MiB", flush=True)
        # Disk throughput drifts between passes on a shared machine: the cases run in
        # interleaved rounds and each is summarised by its median.
        results = {name: float(np.median(times)) for name, times in runs.items()}
        if args.rounds > 1:
            print("  medians over the rounds:")
            for name, seconds in results.items():
                print(f"  {name:<42} {seconds:8.1f} s  {n / seconds / 1e6:7.2f} M rows/s")
        # The limit: the fastest of Dask's runs of its own product.
        limit = min(seconds for name, seconds in results.items() if name.startswith("dask"))
        paper = results["AnalyzeGaussPCA papers' setting (dask)"]
        same = results.get("X.T @ X on the fits' reader (dask_table)")
        for name, seconds in results.items():
            if name.startswith("AnalyzeGauss"):
                print(f"  ratio {name:<45} / dask Gram {seconds / limit:.2f}   "
                      f"/ papers' setting {seconds / paper:.2f}"
                      + ("" if same is None else f"   / Gram on the same reader "
                         f"{seconds / same:.2f}"))
        print(f"  load average {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
