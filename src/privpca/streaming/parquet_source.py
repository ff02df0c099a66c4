"""Parquet files read by record batches or by row groups (:class:`ParquetSource`)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca._validation import caller_stacklevel
from privpca.exceptions import DataDependentWarning
from privpca.solvers.gram import BLOCK_ROWS
from privpca.streaming.row_source import Block, RowSource, _check_block


class ParquetSource(RowSource):
    """A Parquet file or a folder of ``*.parquet`` files, numeric columns, by batches.

    ``columns`` selects columns by name, in the order given (default: all): only those are
    read and type-checked, so a table with text columns can be fitted on its numeric ones.
    ``fill_value``, a public number, replaces every missing cell (a null, or NaN) as the
    blocks are read; infinities stay refused. Whether and how many cells were filled depends
    on the data: it is said once, after the first full pass, by a
    :class:`~privpca.exceptions.DataDependentWarning` (for the data holder only). Without
    ``fill_value`` a missing cell raises :class:`~privpca.exceptions.NonFiniteInputError`.

    A selection of row ranges (:func:`select_rows`: a party's rows in a distributed fit) reads
    only the row groups it overlaps, located from the files' footers.
    """

    def __init__(self, path: str | os.PathLike[str], *, block_rows: int = BLOCK_ROWS,
                 columns: Sequence[str] | None = None,
                 fill_value: float | None = None) -> None:
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("Reading Parquet needs pyarrow: pip install 'privpca[dask]'.") \
                from exc
        root = Path(path)
        files = sorted(root.glob("*.parquet")) if root.is_dir() else [root]
        if not files:
            raise ValueError(f"No .parquet files in {root}.")
        self.files = files
        self.block_rows = int(block_rows)
        metas = [pq.ParquetFile(f) for f in files]
        schema = metas[0].schema_arrow
        if columns is None:
            columns = schema.names
        unknown = [c for c in columns if c not in schema.names]
        if unknown:
            raise ValueError(f"No Parquet column {unknown} in {root}; its columns are "
                             f"{schema.names}.")
        bad = [c for c in columns if schema.field(c).type.id not in _NUMERIC_ARROW_IDS]
        if bad:
            raise ValueError(f"Parquet columns {bad} are not numeric; select numeric columns.")
        self.columns = list(columns)
        self.fill_value = None if fill_value is None else float(fill_value)
        if self.fill_value is not None and not np.isfinite(self.fill_value):
            raise ValueError(f"fill_value must be a finite number; got {fill_value}.")
        self._fill_reported = False
        self.n_samples = sum(m.metadata.num_rows for m in metas)
        self.n_features = len(self.columns)
        #: ``(file, row group, first row, end row)`` in the table's numbering (footers only).
        self.row_groups: list[tuple[str, int, int, int]] = []
        start = 0
        for f, meta in zip(files, metas, strict=True):
            for g in range(meta.metadata.num_row_groups):
                rows = meta.metadata.row_group(g).num_rows
                self.row_groups.append((str(f), g, start, start + rows))
                start += rows

    @staticmethod
    def schema(path: str | os.PathLike[str]) -> list[tuple[str, str, bool]]:
        """``(name, Arrow type, numeric)`` of each column of a Parquet file or folder (its
        first file's footer; no data is read)."""
        import pyarrow.parquet as pq

        root = Path(path)
        files = sorted(root.glob("*.parquet")) if root.is_dir() else [root]
        if not files:
            raise ValueError(f"No .parquet files in {root}.")
        return [(f.name, str(f.type), f.type.id in _NUMERIC_ARROW_IDS)
                for f in pq.ParquetFile(files[0]).schema_arrow]

    def null_counts(self) -> dict[str, int | None]:
        """Nulls per selected column, from the footers' statistics (None where a row group
        has none): no data is read."""
        import pyarrow.parquet as pq

        counts: dict[str, int | None] = dict.fromkeys(self.columns, 0)
        for f in self.files:
            meta = pq.ParquetFile(f).metadata
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for i in range(group.num_columns):
                    chunk = group.column(i)
                    name = chunk.path_in_schema
                    if name not in counts or counts[name] is None:
                        continue
                    stats = chunk.statistics
                    if stats is None or not stats.has_null_count:
                        counts[name] = None
                    else:
                        counts[name] = int(counts[name] or 0) + int(stats.null_count)
        return counts

    def _filled(self, arr: NDArray[Any], counts: NDArray[np.int64] | None) -> NDArray[Any]:
        """``arr`` (a fresh block) with its NaN cells set to ``fill_value``, counted per
        column into ``counts``."""
        if self.fill_value is None or arr.dtype.kind != "f":
            return arr
        missing = np.isnan(arr)
        if missing.any():
            arr[missing] = self.fill_value
            if counts is not None:
                counts += missing.sum(axis=0)
        return arr

    def _report_fill(self, counts: NDArray[np.int64]) -> None:
        if self._fill_reported or not counts.any():
            return
        self._fill_reported = True
        items = [f"{name!r} ({int(c)})" for name, c in zip(self.columns, counts, strict=True)
                 if c]
        warnings.warn(
            f"{int(counts.sum())} missing cells (null or NaN) were read as "
            f"{self.fill_value:g}: {', '.join(items)}.",
            DataDependentWarning, stacklevel=caller_stacklevel())

    def blocks(self) -> Iterator[Block]:
        import pyarrow.parquet as pq

        counts = np.zeros(self.n_features, dtype=np.int64)
        for f in self.files:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=self.block_rows,
                                                         columns=self.columns):
                arr = np.column_stack([c.to_numpy(zero_copy_only=False)
                                       for c in batch.columns])
                yield _check_block(self._filled(arr, counts), self.n_features)
        self._report_fill(counts)

    def pieces(self, ranges: Sequence[tuple[int, int]]) -> list[RowGroupPiece]:
        """The row groups that the increasing, disjoint ``ranges`` overlap, each with the
        rows wanted from it (``(file, group, local start, local stop)``, in table order)."""
        out: list[RowGroupPiece] = []
        groups = self.row_groups
        i = 0
        for a, b in ranges:
            while i < len(groups) and groups[i][3] <= a:
                i += 1
            j = i
            while j < len(groups) and groups[j][2] < b:
                f, g, lo, hi = groups[j]
                out.append((f, g, max(a, lo) - lo, min(b, hi) - lo))
                j += 1
        return out

    def blocks_in(self, ranges: Sequence[tuple[int, int]]) -> Iterator[Block]:
        """The rows of ``ranges``, reading only the row groups they overlap."""
        pieces = self.pieces(ranges)
        k = 0
        while k < len(pieces):  # the pieces of one row group: one read
            f, g = pieces[k][0], pieces[k][1]
            m = k
            while m < len(pieces) and pieces[m][:2] == (f, g):
                m += 1
            group = self._filled(parquet_row_group(f, g, self.columns), None)
            for _, _, a, b in pieces[k:m]:
                yield _check_block(group[a:b], self.n_features)
            k = m


#: A part of one Parquet row group: ``(file, group, first row, end row)`` within the group.
RowGroupPiece = tuple[str, int, int, int]


def parquet_row_group(path: str, group: int, columns: list[str]) -> NDArray[np.float64]:
    """One row group of a Parquet file as a float64 array (rows × columns)."""
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path).read_row_group(group, columns=columns)
    return np.column_stack([c.to_numpy(zero_copy_only=False)
                            for c in table.columns]).astype(np.float64, copy=False)


def _numeric_arrow_ids() -> frozenset[int]:
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover
        return frozenset()
    types = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
             pa.uint32(), pa.uint64(), pa.float16(), pa.float32(), pa.float64()]
    return frozenset(t.id for t in types)


_NUMERIC_ARROW_IDS = _numeric_arrow_ids()
