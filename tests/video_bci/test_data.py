"""The generator: decisive frames, the prior generator's guarantees, the on-disk schema."""

from __future__ import annotations

import json

import numpy as np

from paperflow.video_bci.data import KEYS, N_OPT, load_split, make_split, prior_stats, write_data

from .conftest import data_params


def test_questions_and_decisive_frames(splits):
    d = splits["test"]
    pres = d["frames"][..., :6] > 0.5  # noise σ = 0.3: the bits are recoverable for most frames
    for i in range(len(d["y"])):
        dec = np.flatnonzero(d["decisive"][i])
        assert 0 < len(dec) <= 3 or (d["qtype"][i] == 1 and len(dec) == d["y"][i] == 0)
        if d["qtype"][i] == 1:
            assert d["y"][i] == len(dec) <= 3  # count questions: y = |D| (option 4 is never correct)
        else:
            assert list(dec) == list(range(len(dec)))  # D = frames 0..f, y first appears at f
    assert set(np.unique(d["y"])) <= set(range(N_OPT - 1)) | {4}
    assert pres.shape == (len(d["y"]), 8, 6)


def test_prior_generator_guarantees(splits):
    d = splits["train"]
    y, ans, tr, dec = d["y"], d["prior_ans"], d["prior_trace"], d["decisive"].astype(bool)
    correct = ans == y[:, None]
    covers = ((tr.astype(bool) | ~dec[:, None, :]).all(-1))  # trace ⊇ D
    assert (tr.sum(-1) == 3).all()
    assert covers[correct].all()  # a correct prior's trace covers the decisive frames
    has_dec = dec.any(-1)[:, None].repeat(ans.shape[1], 1)
    assert not covers[~correct & has_dec].any()  # a wrong one misses at least one
    hard = d["hard"] == 1
    m = correct.sum(-1)
    assert (m[hard] <= 3).all()
    # hard items: the wrong priors share one answer, so the majority is wrong; their traces hold the distractor
    for i in np.flatnonzero(hard):
        assert len(set(ans[i][~correct[i]])) == 1
        assert d["majority"][i] != y[i]
        assert tr[i][~correct[i]][:, d["distractor"][i]].all()
    motion = d["frames"][hard, d["distractor"][hard], 6:8]  # the salient distractor frame: motion code 3 (both bits)
    assert motion.mean() > 0.8
    assert ((m == 0) == (d["absent"] == 1)).all()
    easy = ~hard
    assert abs(m[easy].mean() / 8 - 0.7) < 0.05  # Binomial(8, 0.7)
    assert 0.2 < hard.mean() < 0.4


def test_majority_and_entropy(splits):
    d = splits["val"]
    st = prior_stats(d)
    counts = np.stack([(d["prior_ans"] == a).sum(1) for a in range(N_OPT)], 1)
    assert (counts[np.arange(len(d["y"])), d["majority"]] == counts.max(1)).all()
    assert np.allclose(st["p_hat"].sum(1), 1.0)
    assert ((st["H_hat"] >= 0) & (st["H_hat"] <= 1 + 1e-9)).all()
    assert np.isclose(st["H_hat"][counts.max(1) == 8], 0).all()


def test_deterministic_and_written_with_schema(tmp_path):
    p = data_params(n_train=20, n_val=5, n_test=10)
    a, b = make_split(p, "test", 10), make_split(p, "test", 10)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(make_split(p, "val", 10)["frames"], a["frames"])
    write_data(tmp_path / "d", p)
    schema = json.loads((tmp_path / "d" / "schema.json").read_text())
    assert set(schema["keys"]) == set(KEYS) and schema["splits"]["test"]["n"] == 10
    back = load_split(tmp_path / "d", "test")
    for k, (dt, _) in KEYS.items():
        assert back[k].dtype == np.dtype(dt) and np.array_equal(back[k], a[k])
