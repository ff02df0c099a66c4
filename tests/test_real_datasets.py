"""The shipped real data sets: checksums, shapes, preprocessing, corruption detection."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from privpca.datasets import (
    DatasetChecksumError,
    list_datasets,
    load_colon,
    load_covtype,
    load_dataset,
    load_isolet5,
    load_leukemia,
    real,
)

# From /work/shared/datasets/README.md (the staging folder's table), copied by hand: the test
# checks the package's own table against an independent record.
EXPECTED = {
    "covtype": (
        "covtype.npz",
        (581012, 54),
        "d8a3cb4559e910b8236a7d2d1b8fed158fbbdf3bb4c098fc3fabc6535c8ab8a7",
    ),
    "leukemia_allaml": (
        "leukemia_allaml.npz",
        (72, 7129),
        "185ae69f5187a9609d8802b87d3e79fcb5e5ea948f1a4df7d98c919fceff64bf",
    ),
    "leukemia_discrete": (
        "leukemia_skfeature_discrete.npz",
        (72, 7070),
        "f237e5cd77a073a6fbada5ee1f5c410b07de182c8e7273ea07d8b623816b3b31",
    ),
    "colon_discrete": (
        "colon_skfeature_discrete.npz",
        (62, 2000),
        "c811b4402a05f5e97609b2a40080645e3135687a61fa07b6545110eb925c1bf9",
    ),
    "colon_continuous": (
        "colon_continuous.npz",
        (62, 2000),
        "f3821aa6eb03a567dcb4ddf174594de7630eb7b14a172367335e456b8a7cd741",
    ),
    "isolet5": (
        "isolet5.npz",
        (1559, 617),
        "9169aa2751e4db11a7be6518f94d908d9c455c6a23838cf0a258966904f4ad23",
    ),
}
# First 16 hex digits of sha256(X.tobytes()) of the raw float32 arrays (shared README).
ARRAY_HASH = {
    "colon_continuous": "ff1bfbf03ccdb3c2",
    "colon_discrete": "02858930fa4e082f",
    "covtype": "1d4b5b29a4a56d78",
    "isolet5": "a2787c273a8ea221",
    "leukemia_allaml": "ee66e15effcfda24",
    "leukemia_discrete": "49d74783bd521843",
}
SMALL = ["colon_continuous", "colon_discrete", "isolet5", "leukemia_allaml", "leukemia_discrete"]


def test_list_datasets() -> None:
    assert list_datasets() == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_files_match_the_record(name: str) -> None:
    filename, shape, sha = EXPECTED[name]
    info = real.DATASETS[name]
    assert (info.filename, info.shape, info.sha256) == (filename, shape, sha)
    path = real.DATA_DIR / filename
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    with np.load(path, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["X", "y"]
        X = npz["X"]
        assert X.dtype == np.float32 and X.shape == shape
        assert npz["y"].dtype == np.int8 and npz["y"].shape == (shape[0],)
        assert hashlib.sha256(X.tobytes()).hexdigest()[:16] == ARRAY_HASH[name]


@pytest.mark.parametrize("name", SMALL)
def test_load_normalises_rows_without_centring(name: str) -> None:
    bunch = load_dataset(name)
    X = bunch.data
    assert X.dtype == np.float64 and X.shape == EXPECTED[name][1]
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-12)
    assert bunch.sha256 == EXPECTED[name][2]
    assert bunch.target.shape == (X.shape[0],)
    assert "unit L2 norm" in bunch.DESCR and "not centred" in bunch.DESCR
    raw = load_dataset(name, normalize_rows=False).data
    np.testing.assert_allclose(X, raw / np.linalg.norm(raw, axis=1, keepdims=True))


def test_options_center_and_raw() -> None:
    raw = load_isolet5(normalize_rows=False)
    with np.load(real.DATA_DIR / "isolet5.npz") as npz:
        np.testing.assert_array_equal(raw.data, npz["X"].astype(np.float64))
    centred = load_isolet5(center=True, normalize_rows=False).data
    np.testing.assert_allclose(centred.mean(axis=0), 0.0, atol=1e-12)
    both = load_isolet5(center=True).data
    np.testing.assert_allclose(np.linalg.norm(both, axis=1), 1.0)
    assert load_isolet5(center=True).preprocessing == {"center": True, "normalize_rows": True}


def test_variants_and_covtype() -> None:
    assert load_leukemia().data.shape == (72, 7129)
    assert load_leukemia("discrete").data.shape == (72, 7070)
    assert load_colon().data.shape == (62, 2000)
    assert load_colon("discrete").data.shape == (62, 2000)
    cov = load_covtype()
    assert cov.data.shape == (581012, 54)
    assert set(np.unique(cov.target)) == set(range(1, 8))
    with pytest.raises(ValueError, match="variant"):
        load_colon("raw")
    with pytest.raises(ValueError, match="Unknown data set"):
        load_dataset("lung")


def _copy_all(tmp_path: Path) -> Path:
    for info in real.DATASETS.values():
        if info.name != "covtype":
            shutil.copy(real.DATA_DIR / info.filename, tmp_path / info.filename)
    return tmp_path


def test_corrupted_copy_raises(tmp_path: Path) -> None:
    home = _copy_all(tmp_path)
    assert load_colon(data_home=home).data.shape == (62, 2000)  # intact copy loads
    target = home / "colon_skfeature_discrete.npz"
    blob = bytearray(target.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    target.write_bytes(bytes(blob))
    with pytest.raises(DatasetChecksumError, match=r"colon_discrete.*expected c811b440"):
        load_colon("discrete", data_home=home)
    # the error is a ValueError too, and a missing file is a clear FileNotFoundError
    with pytest.raises(ValueError):
        load_colon("discrete", data_home=home)
    with pytest.raises(FileNotFoundError, match="covtype"):
        load_covtype(data_home=home)


def test_verification_is_cached_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _copy_all(tmp_path)
    calls: list[Path] = []
    original = real._sha256

    def counting(path: Path, chunk: int = 1 << 20) -> str:
        calls.append(path)
        return original(path, chunk)

    monkeypatch.setattr(real, "_sha256", counting)
    load_isolet5(data_home=home)
    load_isolet5(data_home=home, center=True)
    assert len(calls) == 1
    # rewriting the file (new mtime) forces a new check
    target = home / "isolet5.npz"
    target.write_bytes(target.read_bytes() + b"x")
    with pytest.raises(DatasetChecksumError):
        load_isolet5(data_home=home)
    assert len(calls) == 2
