import io
import os
import pickle
import pickletools

import numpy as np
import pytest

from paperflow.robotics.pickles import UnsafePickleError, load_obs_dict, load_pickle, load_policy_out, restricted_loads


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    f = tmp_path / "obs_dict.pkl"
    f.write_bytes(pickle.dumps({"full_state": np.zeros((3, 7)), "x": _Evil(marker)}, protocol=2))
    with pytest.raises(UnsafePickleError, match="posix.system|os.system|not allowed"):
        load_obs_dict(f)
    assert not marker.exists()


@pytest.mark.parametrize("module,name", [("builtins", "eval"), ("builtins", "getattr"), ("subprocess", "Popen"),
                                         ("copyreg", "_reconstructor"), ("collections", "OrderedDict")])
def test_forbidden_globals(module, name):
    data = f"c{module}\n{name}\n.".encode()  # protocol-0 GLOBAL opcode
    with pytest.raises(UnsafePickleError, match="not allowed"):
        restricted_loads(data)


def test_numpy1_spelling_loads():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    data = pickle.dumps(arr, protocol=2)
    # hand-edit the byte stream to the numpy 1.x module spelling (as Bridge's 2021-2023 files have)
    data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    assert b"numpy.core.multiarray" in data
    out = restricted_loads(data)
    np.testing.assert_array_equal(out, arr)


def test_protocol5_and_scalars_and_builtins():
    obj = {"a": np.ones(4, np.float32), "s": np.float64(2.5), "set": {1, 2}, "c": complex(1, 2), "t": "x"}
    for proto in (2, 4, 5):
        out = restricted_loads(pickle.dumps(obj, protocol=proto))
        np.testing.assert_array_equal(out["a"], obj["a"])
        assert out["s"] == 2.5 and out["set"] == {1, 2} and out["c"] == complex(1, 2)


def test_object_arrays_and_depth_rejected(tmp_path):
    f = tmp_path / "a.pkl"
    f.write_bytes(pickle.dumps([np.array([{"k": 1}], dtype=object)], protocol=2))
    with pytest.raises(UnsafePickleError):
        load_pickle(f)
    deep = [[[[[[np.zeros(1)]]]]]]
    f.write_bytes(pickle.dumps(deep, protocol=2))
    with pytest.raises(UnsafePickleError, match="deeper"):
        load_pickle(f)


def test_latin1_fallback():
    # a python-2 style str (BINSTRING) with a non-ASCII byte needs encoding="latin1"
    data = b"\x80\x02]q\x00U\x04caf\xe9q\x01a."
    assert restricted_loads(data) == ["caf\xe9"]


def test_shapes_checked(tmp_path):
    f = tmp_path / "obs_dict.pkl"
    f.write_bytes(pickle.dumps({"full_state": np.zeros((3, 6)), "time_stamp": np.zeros(3)}))
    with pytest.raises(UnsafePickleError, match=r"\(N,7\)"):
        load_obs_dict(f)
    g = tmp_path / "policy_out.pkl"
    g.write_bytes(pickle.dumps([{"actions": np.zeros(6)}]))
    with pytest.raises(UnsafePickleError, match=r"\(7,\)"):
        load_policy_out(g)


def test_simulator_pickles_both_policy_forms(tree):
    from tests.robotics.conftest import make_tree

    trajs = sorted(tree.rglob("traj0"))
    obs = load_obs_dict(trajs[0] / "obs_dict.pkl")
    acts = load_policy_out(trajs[0] / "policy_out.pkl")
    assert obs["full_state"].shape[1] == 7 and acts.shape == (len(obs["full_state"]) - 1, 7)
    raw2 = make_tree(tree.parent / "legacy_pol", legacy_policy_out_fraction=1.0)
    t2 = sorted(raw2.rglob("traj0"))[0]
    assert isinstance(load_pickle(t2 / "policy_out.pkl")[0], np.ndarray)
    assert load_policy_out(t2 / "policy_out.pkl").shape[1] == 7
