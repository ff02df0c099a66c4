"""Rows of an uncompressed Zarr store read straight from its chunk files into a buffer.

Zarr's own reader (``array[a:b]``) goes through its asynchronous codec pipeline: every chunk
is read into a fresh bytes object, decoded into a fresh array and copied into a fresh
output, and the page faults on that fresh memory cost several times the CPU of reading the
same chunk files into one reused buffer (figures in docs/BENCHMARKS.md, "Measurements
behind small code choices"). On a machine whose cores also serve the disk, that CPU is what
a streamed fit competes for.

The direct read applies only where a chunk file's bytes *are* the rows: Zarr format 3, a
local store, a single ``bytes`` codec in this machine's byte order (no compression, filter,
transposition or sharding), a regular grid whose chunks span every column. The chunk files
are named by Zarr's own key encoding (``metadata.encode_chunk_key``); a missing chunk is the
array's fill value, as in Zarr. For any other array :meth:`ZarrRows.of` returns None and the
caller uses Zarr's reader. Nothing here is random or private: it moves bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["ZarrRows"]


class ZarrRows:
    """Direct reader of the rows of an eligible Zarr array (module docstring).

    Parameters
    ----------
    array : zarr.Array
        The array; use :meth:`of`, which checks that it is eligible.
    """

    def __init__(self, array: Any, root: Path) -> None:
        self.array = array
        self.root = root
        self.n_rows, self.n_columns = (int(d) for d in array.shape)
        self.chunk_rows = int(array.chunks[0])
        self.dtype = np.dtype(array.dtype)
        self.row_bytes = self.n_columns * self.dtype.itemsize
        fill = array.fill_value
        self.fill_value = 0 if fill is None else fill

    @classmethod
    def of(cls, array: Any) -> ZarrRows | None:
        """A reader for ``array``, or None where its chunk files are not its raw rows."""
        try:
            from zarr.codecs import BytesCodec
            from zarr.storage import LocalStore
        except ImportError:  # pragma: no cover - depends on the environment
            return None
        metadata: Any = getattr(array, "metadata", None)
        if (getattr(metadata, "zarr_format", None) != 3 or array.ndim != 2
                or not isinstance(array.store, LocalStore)):
            return None
        codecs = tuple(metadata.codecs)
        if len(codecs) != 1 or not isinstance(codecs[0], BytesCodec):
            return None  # compressed, filtered, transposed or sharded
        dtype = np.dtype(array.dtype)
        endian = codecs[0].endian
        if dtype.kind not in "biuf" or not dtype.isnative or (
                dtype.itemsize > 1 and getattr(endian, "value", endian) != sys.byteorder):
            return None
        try:
            chunks = tuple(int(c) for c in array.chunks)
        except (TypeError, ValueError):  # pragma: no cover - an irregular chunk grid
            return None
        if chunks[1] != int(array.shape[1]):
            return None  # chunks split the columns: a row is not contiguous in one file
        return cls(array, Path(array.store.root) / array.store_path.path)

    def _chunk_file(self, index: int) -> Path:
        return self.root / self.array.metadata.encode_chunk_key((index, 0))

    def read(self, start: int, stop: int,
             out: NDArray[Any] | None = None) -> NDArray[Any]:
        """Rows ``start:stop`` as an array of the store's dtype: written into the first
        ``stop − start`` rows of ``out`` (C-contiguous, the store's dtype and column count)
        and returned as that view, or into a new array."""
        if not 0 <= start <= stop <= self.n_rows:
            raise IndexError(f"Rows {start}:{stop} are outside the table's {self.n_rows}.")
        m = stop - start
        if out is None:
            out = np.empty((m, self.n_columns), dtype=self.dtype)
        else:
            if (out.dtype != self.dtype or out.ndim != 2 or out.shape[1] != self.n_columns
                    or out.shape[0] < m or not out.flags.c_contiguous):
                raise ValueError("out must be a C-contiguous array of the store's dtype and "
                                 "columns, with at least stop - start rows.")
            out = out[:m]
        flat = out.reshape(-1).view(np.uint8)
        R = self.chunk_rows
        for chunk in range(start // R, -(-stop // R)):
            a, b = max(start, chunk * R), min(stop, (chunk + 1) * R)
            dest = memoryview(flat[(a - start) * self.row_bytes:  # type: ignore[arg-type]
                                   (b - start) * self.row_bytes])
            try:
                with open(self._chunk_file(chunk), "rb", buffering=0) as f:
                    f.seek((a - chunk * R) * self.row_bytes)
                    filled = 0
                    while filled < len(dest):  # a read may return fewer bytes than asked
                        got = f.readinto(dest[filled:])
                        if not got:
                            break
                        filled += got
            except FileNotFoundError:  # never written: the fill value, as Zarr reads it
                out[a - start:b - start] = self.fill_value
                continue
            if filled != len(dest):
                raise ValueError(f"{self._chunk_file(chunk)}: the chunk file is shorter than "
                                 "its rows; the store is damaged or still being written.")
        return out
