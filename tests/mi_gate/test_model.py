"""Captioner, arms' training text, test inputs, metrics and determinism of one run."""

import numpy as np
import pytest

from paperflow.mi_gate import data as D
from paperflow.mi_gate import train as TR
from paperflow.mi_gate.evaluate import consistency, per_type_accuracy, vie
from paperflow.mi_gate.model import random_words

P = dict(n=500, type_probs=[0.4, 0.2, 0.2, 0.2], image_dim=16, image_noise=0.7, split=[0.7, 0.15, 0.15], seed=1,
         split_seed=42)
CFG = {"taus": [0.5, 1.0], "text": {"dim": 16, "hash_seed": 0},
       "captioner": {"hidden": 16, "epochs": 15, "lr": 0.01, "batch_size": 64, "seed": 0},
       "estimator": {"hidden": 16, "lr": 3e-3, "max_epochs": 4, "patience": 2, "holdout": 0.15, "batch_size": 128,
                     "pca_dim": 4, "gmm_components": 3, "gmm_iters": 5, "reg_covar": 0.01, "folds": 2, "seed": 0},
       "model": {"hidden": 16, "epochs": 4, "lr": 0.005, "batch_size": 64, "weight_decay": 0.0},
       "eval": {"conditions": ["clean", "noise2", "worddrop"], "dropout": 0.5, "word_drop": 0.5, "seed": 1,
                "reestimate": False},
       "random_words": ["lamp", "river", "cloud"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("mi") / "synth"
    D.write_dataset(out, *D.generate(P))
    ds = D.load_dataset(out / "data.json", out / "image_features.npy")
    cap, gate = TR.run_gate(ds, CFG)
    return ds, cap, gate


def test_gate_record(world):
    ds, cap, gate = world
    assert gate["captioner_acc"]["test"]["colour"] > 0.9
    assert len(gate["selected"]["1"]) == gate["n_valid"] and len(gate["selected"]["0.5"]) == gate["n_valid"] // 2
    assert set(gate["selected"]["0.5"]) <= set(gate["selected"]["1"]) <= set(ds["train"].ids.tolist())
    assert sum(map(sum, gate["crosstab"])) == len(ds["train"])


def test_arms_text(world):
    ds, _, gate = world
    tr = ds["train"]
    orig, idx0 = TR.training_text("original", None, 0, tr, gate, [])
    assert orig == tr.text and idx0.size == 0
    g, gi = TR.training_text("gated", 0.5, 0, tr, gate, [])
    assert sorted(tr.ids[gi].tolist()) == sorted(gate["selected"]["0.5"])
    for k in gi:
        assert g[k].startswith(tr.text[k] + " a ") and any(c in g[k] for c in D.COLOURS)
    r0, ri0 = TR.training_text("random", 0.5, 0, tr, gate, [])
    w0, wi0 = TR.training_text("words", 0.5, 0, tr, gate, CFG["random_words"])
    r1, ri1 = TR.training_text("random", 0.5, 1, tr, gate, [])
    assert len(ri0) == len(gi) and np.array_equal(ri0, wi0) and not np.array_equal(ri0, ri1)
    assert all(not any(c in w0[k][len(tr.text[k]):] for c in D.COLOURS) for k in wi0)
    assert sum(a != b for a, b in zip(r0, tr.text)) == len(ri0)


def test_random_words_have_caption_length():
    w = random_words(20, ["lamp", "river"], np.random.default_rng(0))
    assert all(len(x.split()) == 3 and x.startswith("a ") for x in w)


def test_t1_appends_the_caption_of_the_corrupted_image(world):
    ds, cap, _ = world
    tests = TR.test_inputs(ds["test"], cap, CFG)
    assert np.array_equal(tests[("T0", "clean")][0], tests[("T1", "clean")][0])
    assert not np.allclose(tests[("T0", "clean")][1], tests[("T1", "clean")][1])
    assert not np.allclose(tests[("T1", "clean")][1], tests[("T1", "noise2")][1])  # captions of noisy images differ
    assert np.array_equal(tests[("T0", "worddrop")][0], ds["test"].image)


def test_run_seed_is_deterministic(world):
    ds, cap, gate = world
    tests = TR.test_inputs(ds["test"], cap, CFG)
    a = TR.run_seed("gated", 0.5, 0, ds, gate, tests, CFG)
    b = TR.run_seed("gated", 0.5, 0, ds, gate, tests, CFG)
    assert a == b
    assert a["test"]["T1"]["clean"]["vie"] == 0.0 and a["test"]["T1"]["clean"]["consistency"] == 1.0
    assert set(a["test"]["T0"]["noise2"]["per_type"]) == set(D.TYPES)


def test_metrics_by_hand():
    y = np.array([0, 1, 1, 0, 1])
    clean = np.array([0, 1, 0, 0, 1])  # right on 0, 1, 3, 4
    corr = np.array([1, 1, 0, 0, 0])   # of those, wrong on 0 and 4
    assert vie(clean, corr, y) == 0.5
    assert consistency(clean, corr) == 0.6
    assert per_type_accuracy(corr, y, np.array([0, 0, 1, 1, 1])) == {"U_V": 0.5, "R": 1 / 3}
    assert np.isnan(vie(1 - y, y, y))


def test_adam_matches_torch_optim():
    import torch

    from paperflow.mi_gate.model import Adam

    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    oa, ob = Adam(list(a.parameters()), lr=0.01, weight_decay=0.1), torch.optim.Adam(b.parameters(), lr=0.01,
                                                                                       weight_decay=0.1)
    x = torch.randn(16, 4)
    for _ in range(5):
        for net, opt in ((a, oa), (b, ob)):
            opt.zero_grad()
            (net(x) ** 2).mean().backward()
            opt.step()
    assert all(torch.allclose(p, q, atol=1e-6) for p, q in zip(a.parameters(), b.parameters()))
