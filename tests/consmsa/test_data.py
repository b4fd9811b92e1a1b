"""The MMSA-layout generator, the restricted unpickler (a malicious pickle is refused and nothing runs)."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from paperflow.consmsa.data import (MODALITIES, REQUIRED, ROLES, SPLITS, RestrictedUnpickler, UnsafePickleError,
                                    generate, load_mmsa, load_pickle, load_roles, write_synthetic)

P = dict(dim=8, seq_len={"text": 10, "audio": 12, "vision": 12}, n_train=30, n_valid=10, n_test=10,
         informative_frac=[0.1, 0.2], redundant_frac=[0.1, 0.2], conflict_prob=0.5, conflict_tokens=[1, 2],
         informative_noise=0.3, redundant_noise=0.1, neutral_scale=1.5, seed=0)


def test_synthetic_round_trip_through_the_restricted_loader(tmp_path: Path):
    counts = write_synthetic(tmp_path / "d", P, 0)
    assert counts == {"train": 30, "valid": 10, "test": 10}
    data = load_mmsa(tmp_path / "d" / "synthetic.pkl")
    raw = load_pickle(tmp_path / "d" / "synthetic.pkl")
    roles = load_roles(tmp_path / "d" / "roles.safetensors")
    for s in SPLITS:
        assert set(REQUIRED) <= set(raw[s])
        for m in MODALITIES:
            x = data[s][m]
            assert x.dtype == np.float32 and x.shape == (counts[s], P["seq_len"][m], 8)
            assert roles[s][m].shape == x.shape[:2] and roles[s][m].dtype == np.uint8
        assert data[s]["regression_labels"].dtype == np.float32
        assert np.all(np.abs(data[s]["regression_labels"]) <= 3)
        assert (data[s]["audio_lengths"] == 12).all() and str(data[s]["id"][0]).startswith(f"synth_{s}_")


def test_roles_follow_the_spec():
    data, roles = generate(P, 1)
    r = roles["train"]["text"]
    n_inf = (r == ROLES["informative"]).sum(1)
    n_con = (r == ROLES["conflicting"]).sum(1)
    assert (n_inf >= 1).all() and (n_con < n_inf).all()  # conflicting tokens are always a minority
    assert 0.2 < (n_con > 0).mean() < 0.8  # conflict_prob 0.5 on 30 utterances
    # informative tokens point along +y·v, conflicting ones along −y·v: opposite signs on the same utterance
    x, y = data["train"]["audio"], data["train"]["regression_labels"]
    n = int(np.argmax((roles["train"]["audio"] == ROLES["conflicting"]).any(1) & (np.abs(y) > 1)))
    inf = x[n, roles["train"]["audio"][n] == ROLES["informative"]].mean(0)
    con = x[n, roles["train"]["audio"][n] == ROLES["conflicting"]].mean(0)
    assert float(inf @ con) < 0


def test_same_seed_same_data_other_seed_other_data():
    a, _ = generate(P, 3)
    b, _ = generate(P, 3)
    c, _ = generate(P, 4)
    assert np.array_equal(a["test"]["vision"], b["test"]["vision"])
    assert not np.array_equal(a["test"]["vision"], c["test"]["vision"])


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_numpy_pickles_of_every_protocol_load(protocol: int):
    obj = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.float64(2.5), "o": np.array(["x"], dtype=object)}
    back = RestrictedUnpickler(io.BytesIO(pickle.dumps(obj, protocol=protocol))).load()
    assert np.array_equal(back["a"], obj["a"]) and back["s"] == 2.5 and back["o"][0] == "x"


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_calling_os_system_is_refused_and_nothing_runs(tmp_path: Path):
    marker = tmp_path / "pwned"
    data, _ = generate(P, 0)
    data["train"]["raw_text"] = _Evil(marker)  # a real-looking MMSA pickle with one poisoned value
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(data))
    with pytest.raises(UnsafePickleError, match=r"(posix|os|nt)\.system"):
        load_mmsa(path)
    assert not marker.exists()
    pickle.loads(path.read_bytes())  # control: the plain unpickler does run it (so the test could fail)
    assert marker.exists()


def test_other_globals_are_refused(tmp_path: Path):
    bad = pickle.dumps({"f": print})
    with pytest.raises(UnsafePickleError, match="builtins.print"):
        RestrictedUnpickler(io.BytesIO(bad)).load()


def test_layout_errors_are_clear(tmp_path: Path):
    data, _ = generate(P, 0)
    del data["valid"]["vision_lengths"]
    (tmp_path / "x.pkl").write_bytes(pickle.dumps(data))
    with pytest.raises(ValueError, match="valid' lacks keys \\['vision_lengths'\\]"):
        load_mmsa(tmp_path / "x.pkl")
    data, _ = generate(P, 0)
    data["test"]["audio_lengths"] = np.full(10, 99)
    (tmp_path / "y.pkl").write_bytes(pickle.dumps(data))
    with pytest.raises(ValueError, match="audio_lengths"):
        load_mmsa(tmp_path / "y.pkl")
