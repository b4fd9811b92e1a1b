"""mAP@all against a slow direct reference (ties included); code packing; numpy quantizer."""

import numpy as np
import pytest
import torch

from paperflow.hashing.evaluate import both_directions, hamming, map_at_all, map_at_all_slow, to_bits, unpack_pm1
from paperflow.hashing.model import HashNet, numpy_forward


@pytest.mark.parametrize("bits,seed,multi", [(8, 0, False), (8, 1, True), (16, 2, True), (24, 3, False)])
def test_map_matches_slow_reference_with_ties(bits, seed, multi):
    rng = np.random.default_rng(seed)
    nq, nd, K = 17, 41, 6
    # few distinct codes -> many tied Hamming distances
    base = rng.integers(0, 2, (5, bits))
    q = np.packbits(base[rng.integers(0, 5, nq)] ^ (rng.random((nq, bits)) < 0.1), axis=1)
    d = np.packbits(base[rng.integers(0, 5, nd)] ^ (rng.random((nd, bits)) < 0.1), axis=1)
    if multi:
        ql = (rng.random((nq, K)) < 0.25).astype(np.uint8)
        dl = (rng.random((nd, K)) < 0.25).astype(np.uint8)
        ql[0] = 0  # a query without any relevant item is skipped by both
    else:
        ql = np.eye(K, dtype=np.uint8)[rng.integers(0, K, nq)]
        dl = np.eye(K, dtype=np.uint8)[rng.integers(0, K, nd)]
    D = hamming(q, d, bits)
    assert len(np.unique(D)) < D.size // 5  # the case really has ties
    assert map_at_all(q, d, ql, dl, bits) == pytest.approx(map_at_all_slow(q, d, ql, dl), abs=1e-12)


def test_tie_order_matters_and_is_by_database_index():
    # all distances tie; relevant item at index 0 -> AP 1, at index 2 -> AP 1/3
    q = np.zeros((1, 1), np.uint8)
    d = np.zeros((3, 1), np.uint8)
    lab = np.eye(3, dtype=np.uint8)
    assert map_at_all(q, d, lab[[0]], lab, 8) == pytest.approx(1.0)
    assert map_at_all(q, d, lab[[2]], lab, 8) == pytest.approx(1 / 3)


def test_hand_computed_ap():
    # distances 0,1,2,3 with relevance 1,0,1,0 -> AP = (1/1 + 2/3)/2
    q = np.packbits(np.zeros((1, 8), bool), axis=1)
    db = np.zeros((4, 8), bool)
    for i in range(4):
        db[i, :i] = True
    ql = np.array([[1, 0]], np.uint8)
    dl = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], np.uint8)
    assert map_at_all(q, np.packbits(db, axis=1), ql, dl, 8) == pytest.approx((1 + 2 / 3) / 2)


def test_bits_sign_zero_positive_and_hamming_popcount():
    o = np.array([[0.0, -1e-9, 2.0, -3.0, 0.0, 1.0, -1.0, 0.5]])
    b = to_bits(o)
    assert unpack_pm1(b, 8).tolist() == [[1, -1, 1, -1, 1, 1, -1, 1]]
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (5, 4), dtype=np.uint8), rng.integers(0, 256, (6, 4), dtype=np.uint8)
    pop = np.array([[bin(int.from_bytes((a ^ c).tobytes(), "big")).count("1") for c in y] for a in x])
    assert np.array_equal(hamming(x, y, 32), pop)


def test_numpy_quantizer_matches_torch_model():
    torch.manual_seed(0)
    net = HashNet(12, 9, 16, 32, 5, 0)
    xi, xt = torch.randn(40, 12), torch.randn(40, 9)
    w = {k: v.numpy() for k, v in net.state_dict().items()}
    with torch.no_grad():
        zi, zt = net(xi, xt)
    assert np.array_equal(to_bits(numpy_forward(w, "img", xi.numpy())), to_bits(zi.numpy()))
    assert np.array_equal(to_bits(numpy_forward(w, "txt", xt.numpy())), to_bits(zt.numpy()))


def test_both_directions_uses_cross_modal_codes():
    rng = np.random.default_rng(0)
    lab = np.eye(4, dtype=np.uint8)[np.arange(20) % 4]
    good = np.packbits(np.repeat(np.eye(4, dtype=bool)[np.arange(20) % 4], 2, axis=1), axis=1)
    rand = np.packbits(rng.random((20, 8)) < 0.5, axis=1)
    m = both_directions({"q_img": good, "db_txt": good, "q_txt": rand, "db_img": rand}, lab, lab, 8)
    assert m["i2t"] == pytest.approx(1.0) and m["t2i"] < 0.9


def test_auroc_equals_scikit_learn_with_ties():
    """The reliability AUROC is computed without scikit-learn (a job no longer imports it for this);
    it must equal roc_auc_score, ties included."""
    from sklearn.metrics import roc_auc_score

    from paperflow.hashing.train import _auroc

    rng = np.random.default_rng(3)
    for n, dec in [(7, 1), (300, 1), (2000, 3), (2000, 8)]:
        score, pos = rng.random(n).round(dec), rng.random(n) < 0.7
        assert _auroc(score, pos) == pytest.approx(roc_auc_score(pos, score), abs=1e-12)
    assert _auroc(np.ones(5), np.ones(5, bool)) is None
