"""Publishing a fitted model: privpca.save / privpca.load, and plain pickle.

save writes the released attributes only (constructor parameters but ledger and random_state,
attributes named like ``components_``, the privacy_ record) into an .npz archive read without
pickle; load gives back an estimator whose transform is the same bit for bit and whose
privacy_ equals the original's, with no ledger.
"""

from __future__ import annotations

import json
import pickle
import warnings
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import privpca
from privpca import PrivacyLedger, ReproducibleNoiseWarning
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.persistence import HEADER, header, is_released, without_ledger

pytestmark = pytest.mark.filterwarnings("ignore::privpca.ReproducibleNoiseWarning")

NAMES = [*sorted(PRIVATE_ESTIMATORS), "PCA"]


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((20_000, 6)) * np.array([3.0, 2.0, 1.0, 1.0, 0.5, 0.5]) + 2.0
    Y = rng.standard_normal((64, 6)) * 2.0 + 1.0
    return X, Y


@pytest.fixture(scope="module")
def fitted(table):
    """Every registered estimator and privpca.PCA, fitted on its own ledger."""
    X, _ = table
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in NAMES:
            cls = privpca.PCA if name == "PCA" else PRIVATE_ESTIMATORS[name]
            ledger = PrivacyLedger()
            out[name] = (cls(n_components=2, random_state=0, ledger=ledger).fit(X), ledger)
    return out


def _round_trip(est, tmp_path, name="model.npz"):
    path = privpca.save(est, tmp_path / name)
    return path, privpca.load(path)


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_is_bit_for_bit(name, fitted, table, tmp_path):
    est, ledger = fitted[name]
    _, Y = table
    _, back = _round_trip(est, tmp_path)
    assert type(back) is type(est)
    assert est.transform(Y).tobytes() == back.transform(Y).tobytes()
    Z = est.transform(Y)
    assert est.inverse_transform(Z).tobytes() == back.inverse_transform(Z).tobytes()
    assert list(back.get_feature_names_out()) == list(est.get_feature_names_out())
    assert back.privacy_ == est.privacy_
    # the record keeps its events: it still composes, on a fresh ledger, as the original does
    assert [repr(s.dp_event) for s in back.privacy_.spends] == [
        repr(s.dp_event) for s in est.privacy_.spends]
    # no ledger, no seed; every other parameter as fitted
    assert back.ledger is None and back.random_state is None
    assert est.ledger is ledger  # the original keeps its own
    ours = {k: v for k, v in est.get_params(deep=False).items()
            if k not in ("ledger", "random_state")}
    theirs = {k: v for k, v in back.get_params(deep=False).items()
              if k not in ("ledger", "random_state")}
    assert theirs.keys() == ours.keys()
    for key, value in ours.items():
        np.testing.assert_equal(theirs[key], value)
    if name == "PCA":
        assert type(back.estimator_) is type(est.estimator_)
        assert back.estimator_.ledger is None
        assert back.privacy_ is back.estimator_.privacy_  # one record, as after a fit
        assert back.mechanism_ == est.mechanism_


def test_a_loaded_model_cannot_charge_the_original_ledger(fitted, table, tmp_path):
    est, ledger = fitted["analyze-gauss"]
    spent = len(ledger)
    _, back = _round_trip(est, tmp_path)
    fresh = PrivacyLedger()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back.set_params(ledger=fresh, random_state=1).fit(table[0])
    assert len(ledger) == spent and len(fresh) == 1


@pytest.mark.parametrize("name", NAMES)
def test_the_file_holds_released_attributes_only(name, fitted, tmp_path):
    est, _ = fitted[name]
    est = without_ledger(est)
    est._private_cache = np.arange(5.0)  # a private attribute: never written
    est.rows_seen = np.arange(3.0)  # neither a parameter nor a fitted attribute: not written
    path = privpca.save(est, tmp_path / "m.npz")
    with zipfile.ZipFile(path) as archive:
        members = sorted(archive.namelist())
    with np.load(path, allow_pickle=False) as npz:
        text = str(npz[HEADER][()])
        arrays = {k: npz[k] for k in npz.files if k != HEADER}
    head = json.loads(text)
    assert head == header(path) and head["format"] == "privpca-model"
    assert members == sorted(f"{k}.npy" for k in [HEADER, *arrays])
    assert "PrivacyLedger" not in text and "_private_cache" not in text
    assert "rows_seen" not in text

    referenced: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if "__array__" in node:
                referenced.append(node["__array__"])
            if "__estimator__" in node:
                check_node(node["__estimator__"])
                return
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    def check_node(node):
        cls = privpca.PCA if node["class"] == "PCA" else getattr(privpca, node["class"])
        assert set(node["params"]) == set(cls().get_params(deep=False))
        assert node["params"]["ledger"] is None and node["params"]["random_state"] is None
        assert node["attributes"], "no fitted attribute written"
        assert all(is_released(key) for key in node["attributes"])
        assert "privacy_" in node["attributes"]
        walk(node["params"])
        walk(node["attributes"])

    check_node(head["estimator"])
    assert sorted(referenced) == sorted(arrays)  # every array is a released attribute's


def test_a_seed_generator_and_public_arrays_in_parameters(table, tmp_path):
    """A Generator in random_state is not written (its state is the noise); a public centre
    given as an array is a parameter, written and read back."""
    X, Y = table
    centre = np.full(6, 2.0)
    est = privpca.AnalyzeGaussPCA(2, centering=centre, data_norm=20.0, ledger=PrivacyLedger(),
                                  random_state=np.random.default_rng(3)).fit(X)
    path, back = _round_trip(est, tmp_path)
    assert header(path)["estimator"]["params"]["random_state"] is None
    np.testing.assert_array_equal(back.centering, centre)
    assert est.transform(Y).tobytes() == back.transform(Y).tobytes()


def test_save_refuses_what_is_not_released(fitted, table, tmp_path):
    X, _ = table
    est = without_ledger(fitted["analyze-gauss"][0])
    target = tmp_path / "refused.npz"
    for attribute, value, words in [
        ("generator_", np.random.default_rng(0), "random generator"),
        ("table_", X, "one value per record"),
        ("ledger_", PrivacyLedger(), "PrivacyLedger"),
        ("fn_", len, "function"),
    ]:
        setattr(est, attribute, value)
        with pytest.raises(TypeError, match=words):
            privpca.save(est, target)
        delattr(est, attribute)
        assert not target.exists()  # nothing written
    with pytest.raises(NotFittedError):
        privpca.save(privpca.AnalyzeGaussPCA(), target)
    from sklearn.decomposition import PCA as SklearnPCA

    with pytest.raises(TypeError, match="private estimators"):
        privpca.save(SklearnPCA(2).fit(X), target)
    assert not target.exists()


def test_load_runs_no_code_and_refuses_tampered_files(fitted, tmp_path):
    est, _ = fitted["analyze-gauss"]
    path = privpca.save(est, tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as npz:
        entries = {k: npz[k] for k in npz.files}
    head = json.loads(str(entries[HEADER][()]))

    def write(name, new_head, **extra):
        out = tmp_path / name
        arrays = {k: v for k, v in entries.items() if k != HEADER}
        with open(out, "wb") as handle:
            np.savez(handle, **{HEADER: np.array(json.dumps(new_head))}, **arrays, **extra)
        return out

    other = json.loads(json.dumps(head))
    other["estimator"]["class"] = "Popen"
    with pytest.raises(ValueError, match="not one of privpca's private estimators"):
        privpca.load(write("class.npz", other))
    seeded = json.loads(json.dumps(head))
    seeded["estimator"]["params"]["random_state"] = 0
    with pytest.raises(ValueError, match="never does"):
        privpca.load(write("seed.npz", seeded))
    private = json.loads(json.dumps(head))
    private["estimator"]["attributes"]["_cache"] = 1.0
    with pytest.raises(ValueError, match="not a released attribute"):
        privpca.load(write("private.npz", private))
    with pytest.raises(ValueError, match="no released attribute refers to"):
        privpca.load(write("extra.npz", head, hidden=np.arange(4.0)))
    pickled = tmp_path / "pickled.npz"
    pickled.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="not a privpca model file"):
        privpca.load(pickled)
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="not a privpca model file"):
        privpca.load(objects)


def test_output_config_and_feature_names_survive(table, tmp_path):
    pd = pytest.importorskip("pandas")
    X, Y = table
    columns = [f"c{i}" for i in range(6)]
    est = privpca.PCA(2, random_state=0, ledger=PrivacyLedger()).fit(
        pd.DataFrame(X, columns=columns))
    est.set_output(transform="pandas")
    _, back = _round_trip(est, tmp_path)
    frame = pd.DataFrame(Y, columns=columns)
    pd.testing.assert_frame_equal(back.transform(frame), est.transform(frame))
    assert back.feature_names_in_.dtype == object
    assert list(back.feature_names_in_) == columns


def test_pickle_of_a_model_with_a_ledger_points_to_save(fitted, table):
    est, ledger = fitted["analyze-gauss"]
    with pytest.raises(TypeError, match=r"privpca\.save") as info:
        pickle.dumps(est)
    assert "another process" in str(info.value)
    joblib = pytest.importorskip("joblib")
    import io

    with pytest.raises(TypeError, match=r"privpca\.save"):
        joblib.dump(est, io.BytesIO())
    copy = without_ledger(est)
    assert copy.ledger is None and est.ledger is ledger
    again = pickle.loads(pickle.dumps(copy))
    _, Y = table
    assert again.transform(Y).tobytes() == est.transform(Y).tobytes()
    pca = without_ledger(fitted["PCA"][0])
    assert pca.ledger is None and pca.estimator_.ledger is None
    pickle.loads(pickle.dumps(pca))


def test_save_warns_for_a_seeded_fit_only(table, tmp_path):
    X, _ = table
    seeded = privpca.AnalyzeGaussPCA(2, ledger=PrivacyLedger(), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeded.fit(X)
    with pytest.warns(ReproducibleNoiseWarning, match="not a release") as caught:
        privpca.save(seeded, tmp_path / "seeded.npz")
    assert caught[0].filename == __file__
    secure = privpca.AnalyzeGaussPCA(2, ledger=PrivacyLedger()).fit(X)
    assert secure.privacy_.noise_mode == "secure"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReproducibleNoiseWarning)
        path = privpca.save(secure, tmp_path / "secure.npz")
    back = privpca.load(path)
    assert back.privacy_ == secure.privacy_ and back.privacy_.noise_mode == "secure"
