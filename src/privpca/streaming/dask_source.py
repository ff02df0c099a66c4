"""Dask arrays reduced where their blocks live (:class:`DaskSource`), on a local scheduler or
a ``distributed`` cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from privpca.streaming.array_source import READ_THREADS_PER_CORE
from privpca.streaming.row_source import Block, RowSource, T, _check_block, check_shape


class DaskSource(RowSource):
    """A ``dask.array.Array``: each block reduced where it lives, partial sums combined.

    The array is re-chunked to whole rows (one chunk across the columns) if needed; its row
    count must be known (``X.compute_chunk_sizes()`` after a filter).
    """

    def __init__(self, X: Any) -> None:
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D dask array; got shape {X.shape}.")
        if any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("The dask array's row chunks are unknown; call "
                             "X.compute_chunk_sizes() first (n is public and must be known).")
        if len(X.chunks[1]) != 1:
            X = X.rechunk({1: -1})
        self.X = X
        self.n_samples, self.n_features = (int(d) for d in X.shape)

    def blocks(self) -> Iterator[Block]:
        for chunk in self.X.to_delayed().ravel():
            yield _check_block(chunk.compute(), self.n_features)

    def reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], *,
               aux: Callable[[int, int], tuple[Any, ...]] | None = None,
               desc: str = "pass", raw: bool = False) -> T:
        import dask

        p = self.n_features

        def part(chunk: Any, *args: Any) -> T:
            return fn(check_shape(chunk, p) if raw else _check_block(chunk, p), *args)

        bounds = np.concatenate([[0], np.cumsum(self.X.chunks[0])]).astype(int)
        parts = [dask.delayed(part)(c, *(() if aux is None else aux(int(bounds[i]),
                                                                     int(bounds[i + 1]))))
                 for i, c in enumerate(self.X.to_delayed().ravel())]
        leaves = list(parts)
        while len(parts) > 1:  # a balanced tree: log₂(blocks) rounds of pairwise combines
            parts = [dask.delayed(combine)(parts[i], parts[i + 1]) if i + 1 < len(parts)
                     else parts[i] for i in range(0, len(parts), 2)]
        from threadpoolctl import threadpool_limits

        # Dask runs blocks in parallel already: one BLAS thread per block (as its distributed
        # workers do by default), else the local threads oversubscribe the cores.
        with threadpool_limits(1, user_api="blas"):
            client = _distributed_client()
            if client is not None and self.progress:
                return _compute_with_progress(client, leaves, parts[0], desc)
            if self.progress:  # local schedulers; on stderr (stdout may carry the output)
                from dask.diagnostics import ProgressBar

                with ProgressBar(out=sys.stderr):
                    return dask.compute(parts[0], **_local_dask_options())[0]
            return dask.compute(parts[0], **_local_dask_options())[0]


def _local_dask_options() -> dict[str, Any]:
    """``dask.compute`` options for Dask's local threaded scheduler: twice as many threads
    as cores (:data:`READ_THREADS_PER_CORE`), unless the user configured a scheduler or a
    thread count of their own."""
    import dask

    if (dask.config.get("num_workers", None) is not None
            or dask.config.get("scheduler", None) not in (None, "threads", "threading")):
        return {}
    return {"num_workers": READ_THREADS_PER_CORE * (os.cpu_count() or 1)}


def _distributed_client() -> Any:
    """The active ``distributed.Client``, or None (no cluster, or distributed absent)."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - dask without distributed
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _compute_with_progress(client: Any, leaves: list[Any], root: Any, desc: str) -> Any:
    """Compute ``root`` on the cluster with a tqdm bar (stderr) over its block tasks."""
    from distributed import as_completed

    futures = client.compute(leaves)  # the per-block tasks: what takes the time
    root_future = client.compute(root)  # shares their keys: nothing is computed twice
    with tqdm(total=len(futures), desc=desc, unit="block", leave=False) as bar:
        for _ in as_completed(futures):
            bar.update(1)
    return root_future.result()


def _is_dask_array(X: Any) -> bool:
    return type(X).__module__.startswith("dask.array") and hasattr(X, "to_delayed")
