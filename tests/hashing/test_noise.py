"""Noise injection: exact counts, uniform symmetric targets, asymmetric map, multi-label flips,
and the record reproducing the noisy labels exactly."""

import json

import numpy as np
import pytest
from scipy import stats

from paperflow.hashing.noise import (NoiseRecordError, default_map, inject, load_record, make_record, read_noisy,
                                     verify_record, write_record)


def onehot(y, K):
    return np.eye(K, dtype=np.uint8)[y]


@pytest.mark.parametrize("N,r", [(4000, 0.4), (1001, 0.2), (500, 0.8), (37, 0.5)])
def test_symmetric_exact_count_and_zero_diagonal(N, r):
    rng = np.random.default_rng(0)
    Y = onehot(rng.integers(0, 20, N), 20)
    arrays, side = make_record(Y, r, "sym", 10)
    assert side["n_changed"] == int(np.floor(N * r)) == side["n_picked"]
    # realised rate within sampling error of the requested rate (here exact up to flooring)
    assert abs(side["realized_rate"] - r) < 1.0 / N
    T = np.array(side["transitions"])
    src, tgt = arrays["src"], arrays["tgt"]
    assert np.all(src != tgt)  # every changed row left its class
    assert T.sum() == N and np.trace(T) == N - side["n_changed"]
    assert np.all(arrays["noisy"].sum(1) == 1)
    assert set(np.flatnonzero(arrays["changed"])) == set(arrays["picked"].tolist())


def test_symmetric_targets_uniform_chi2():
    K, N = 10, 30000
    Y = onehot(np.arange(N) % K, K)
    arrays, _ = make_record(Y, 0.5, "sym", 3)
    counts = np.zeros((K, K))
    np.add.at(counts, (arrays["src"], arrays["tgt"]), 1)
    off = counts[~np.eye(K, dtype=bool)]
    assert stats.chisquare(off).pvalue > 0.001
    # a biased target rule would fail the same test
    biased = off.copy()
    biased[: K - 1] *= 1.3
    assert stats.chisquare(biased, biased.sum() / len(biased) * np.ones_like(biased)).pvalue < 0.001


def test_asymmetric_follows_map():
    K, N = 20, 2000
    Y = onehot(np.random.default_rng(1).integers(0, K, N), K)
    arrays, side = make_record(Y, 0.4, "asym", 10)
    cmap = default_map(K)
    assert side["n_changed"] == 800
    assert np.all(arrays["tgt"] == cmap[arrays["src"]])


def test_asymmetric_multilabel_walks_past_taken_targets():
    Y = np.zeros((1, 5), np.uint8)
    Y[0, [1, 2]] = 1  # if src = 1, map[1] = 2 is taken -> walk to 3
    for seed in range(20):
        noisy, _ = inject(Y, 1.0, "asym", seed)
        diff = noisy.astype(int) - Y
        assert (diff == -1).sum() == 1 and (diff == 1).sum() == 1
        src, tgt = int(np.flatnonzero(diff == -1)[0]), int(np.flatnonzero(diff == 1)[0])
        assert tgt == {1: 3, 2: 3}[src]


def test_multilabel_flip_protocol_two_entries():
    rng = np.random.default_rng(2)
    N, K = 3000, 24
    Y = np.zeros((N, K), np.uint8)
    for i in range(N):
        Y[i, rng.choice(K, rng.integers(1, 4), replace=False)] = 1
    arrays, side = make_record(Y, 0.5, "sym", 10)
    d = arrays["noisy"].astype(int) - Y
    ch = arrays["changed"]
    assert np.all((d[ch] == 1).sum(1) == 1) and np.all((d[ch] == -1).sum(1) == 1)
    assert np.all(d[~ch] == 0)
    assert side["n_changed"] == 1500 and "transitions" not in side
    assert side["entry_flip_rate"] == pytest.approx(2 * 1500 / (N * K))


def test_rate_zero_is_identity():
    Y = onehot(np.arange(50) % 5, 5)
    arrays, side = make_record(Y, 0.0, "sym", 10)
    assert side["n_changed"] == 0 and np.array_equal(arrays["noisy"], Y)


def test_record_reproduces_noisy_labels_and_detects_tampering(tmp_path):
    Y = onehot(np.random.default_rng(0).integers(0, 20, 500), 20)
    arrays, side = make_record(Y, 0.6, "sym", 11)
    npz, js = tmp_path / "r.npz", tmp_path / "r.json"
    write_record(npz, js, arrays, side)
    side2 = json.loads(js.read_text())
    verify_record(npz, side2)  # re-injection from clean reproduces sha256(noisy)
    rec = load_record(npz)
    again, _ = inject(rec["clean"], side2["requested_rate"], side2["mode"], side2["seed"])
    assert np.array_equal(again, rec["noisy"]) and np.array_equal(read_noisy(npz), rec["noisy"])
    # a record whose noisy labels were not produced by the rule fails, naming both hashes
    bad = dict(rec)
    bad["noisy"] = rec["noisy"].copy()
    i = int(np.flatnonzero(~rec["changed"])[0])
    bad["noisy"][i] = np.roll(bad["noisy"][i], 1)
    side_bad = dict(side2, sha256_noisy=__import__("paperflow.hashing.data", fromlist=["x"]).sha256_array(bad["noisy"]))
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(NoiseRecordError, match="re-injection gives sha256"):
        verify_record(tmp_path / "bad.npz", side_bad)
    with pytest.raises(NoiseRecordError, match="do not match"):
        verify_record(tmp_path / "bad.npz", side2)
