"""Direct reads of an uncompressed Zarr store's chunk files (privpca.streaming.zarr_rows)."""

from __future__ import annotations

import numpy as np
import pytest

from privpca.streaming.reductions import clipped_gram_and_sum, count_rows
from privpca.streaming.selection import RowRanges
from privpca.streaming.sources import ArraySource
from privpca.streaming.zarr_rows import ZarrRows

zarr = pytest.importorskip("zarr")


def _store(tmp_path, table, chunk_rows, name="t.zarr", **kw):
    kw.setdefault("compressors", None)
    out = zarr.create_array(tmp_path / name, shape=table.shape,
                            chunks=(chunk_rows, table.shape[1]), dtype=table.dtype, **kw)
    out[:] = table
    return zarr.open_array(tmp_path / name, mode="r")


@pytest.fixture
def table():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((1_003, 7)) * 4 + 50).astype(np.float32)


def test_reads_equal_zarr_for_any_range(tmp_path, table):
    arr = _store(tmp_path, table, 100)
    reader = ZarrRows.of(arr)
    assert reader is not None
    rng = np.random.default_rng(0)
    ranges = [(0, 1_003), (0, 1), (99, 101), (1_000, 1_003), (250, 250)]
    ranges += [tuple(sorted(rng.integers(0, 1_004, 2))) for _ in range(30)]
    for a, b in ranges:
        got = reader.read(int(a), int(b))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, table[a:b])


def test_reads_into_the_callers_buffer(tmp_path, table):
    reader = ZarrRows.of(_store(tmp_path, table, 100))
    buffer = np.full((400, 7), np.nan, dtype=np.float32)
    got = reader.read(150, 420, out=buffer)
    assert np.shares_memory(got, buffer) and got.shape == (270, 7)
    np.testing.assert_array_equal(buffer[:270], table[150:420])
    assert np.isnan(buffer[270:]).all()  # the rest of the buffer untouched
    for bad in (np.empty((100, 7), np.float32), np.empty((400, 7), np.float64),
                np.empty((400, 8), np.float32), np.empty((7, 400), np.float32).T):
        with pytest.raises(ValueError, match="C-contiguous"):
            reader.read(150, 420, out=bad)
    with pytest.raises(IndexError):
        reader.read(1_000, 1_004)


def test_unwritten_chunks_read_as_the_fill_value(tmp_path):
    table = np.ones((30, 3))
    table[10:20] = 7.0  # all fill value: Zarr writes no file for this chunk
    arr = _store(tmp_path, table, 10, fill_value=7.0)
    assert not (tmp_path / "t.zarr" / "c" / "1" / "0").exists()
    np.testing.assert_array_equal(ZarrRows.of(arr).read(5, 30), table[5:30])


def test_a_truncated_chunk_file_is_refused(tmp_path, table):
    arr = _store(tmp_path, table, 100)
    chunk = tmp_path / "t.zarr" / "c" / "3" / "0"
    chunk.write_bytes(chunk.read_bytes()[:1000])
    with pytest.raises(ValueError, match="shorter than its rows"):
        ZarrRows.of(arr).read(250, 450)


@pytest.mark.parametrize("layout", ["compressed", "split columns", "big-endian", "format 2",
                                    "sharded"])
def test_other_layouts_are_left_to_zarr(tmp_path, table, layout):
    if layout == "compressed":
        arr = _store(tmp_path, table, 100, compressors="auto")
    elif layout == "split columns":
        out = zarr.create_array(tmp_path / "s.zarr", shape=table.shape, chunks=(100, 3),
                                dtype=table.dtype, compressors=None)
        out[:] = table
        arr = out
    elif layout == "big-endian":
        arr = _store(tmp_path, table, 100,
                     serializer=zarr.codecs.BytesCodec(endian="big"))  # bytes swapped on disk
    elif layout == "format 2":
        arr = _store(tmp_path, table, 100, zarr_format=2)
    else:
        arr = _store(tmp_path, table, 100, shards=(500, 7))
    assert ZarrRows.of(arr) is None
    # ... and a fit's source still reads it, through Zarr
    source = ArraySource(arr, block_rows=128)
    assert source.direct is None
    assert count_rows(source) == len(table)
    np.testing.assert_array_equal(np.concatenate(list(source.blocks())), table)


def test_threaded_reductions_reuse_buffers_without_mixing_blocks(tmp_path, table):
    """Many small blocks through each thread's reused buffer: the same sums as in memory,
    for the whole store and for a selection of rows (a held-out share)."""
    arr = _store(tmp_path, table, 50)
    direct, memory = ArraySource(arr, block_rows=64), ArraySource(table, block_rows=64)
    assert direct.direct is not None
    centre, bound = np.full(7, 50.0), 30.0
    for a, b in ((direct, memory),
                 (RowRanges(direct, [(3, 90), (400, 777)]),
                  RowRanges(memory, [(3, 90), (400, 777)]))):
        gram, total, clipped = clipped_gram_and_sum(a, centre, None, bound)
        gram0, total0, clipped0 = clipped_gram_and_sum(b, centre, None, bound)
        np.testing.assert_allclose(gram, gram0, rtol=1e-12)
        np.testing.assert_allclose(total, total0, rtol=1e-12, atol=1e-9)
        assert clipped == clipped0
    blocks = list(direct.blocks())  # the iterator: fresh arrays, never a shared buffer
    assert not np.shares_memory(blocks[0], blocks[1])
    np.testing.assert_array_equal(np.concatenate(blocks), table)


def test_an_array_inside_a_group(tmp_path, table):
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    out = group.create_array("sub/arr", shape=table.shape, chunks=(100, 7), dtype=table.dtype,
                             compressors=None)
    out[:] = table
    for arr in (group["sub/arr"], zarr.open_array(tmp_path / "g.zarr" / "sub" / "arr", mode="r")):
        np.testing.assert_array_equal(ZarrRows.of(arr).read(95, 1_003), table[95:])
