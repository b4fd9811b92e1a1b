"""PVCL arithmetic (streaming top-K, GDA, refinement, aggregation) and the feature-level simulation (Tier A):
synthetic patch features with a known modality gap and entanglement. Tier A checks the arithmetic only; it
is never evidence in summary.md."""

from __future__ import annotations

import numpy as np
import pytest

from paperflow.piaa import evaluate as ev
from paperflow.piaa import method as M


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def world(C=5, D=16, gap=0.0, seed=0):
    """Class directions in image space; text embeddings = the same directions shifted by a common offset."""
    g = np.random.default_rng(seed)
    mu = unit(g.normal(size=(C, D)))
    offset = unit(g.normal(size=D)) * gap
    return mu, unit(mu + offset), g


def patches_of(mu, labels, g, noise=0.35, rho=0.0):
    """[N, P, D] patches: each patch shows one of its image's classes; with entanglement rho every patch is
    mixed towards the image's mean class direction."""
    N, P = len(labels), 8
    out = np.empty((N, P, mu.shape[1]))
    for n, labs in enumerate(labels):
        own = g.choice(labs, size=P)
        img_mean = mu[labs].mean(0)
        out[n] = unit((1 - rho) * mu[own] + rho * img_mean + noise * g.normal(size=(P, mu.shape[1])) / 4)
    return out


def test_streaming_topk_equals_global_topk():
    mu, t, g = world()
    f = unit(mu[g.integers(0, 5, 3000)] + 0.5 * g.normal(size=(3000, 16)))
    chunks = [f[i:i + 100] for i in range(0, 3000, 100)]
    a = M.build_bank(iter(chunks), t, k=40, merge_every=3)
    b = M.build_bank(iter([f]), t, k=40, merge_every=1)  # one batch: the exact global top-K
    key = lambda bank: sorted(map(tuple, np.round(bank.feats, 10)))  # noqa: E731
    assert key(a) == key(b)
    for c in np.unique(a.label):  # per class: at most k, the lowest entropies
        assert (a.label == c).sum() <= 40
    logits = f @ t.T
    h = M.entropy(M.softmax(60 * logits))
    y = logits.argmax(1)
    c0 = int(np.bincount(y).argmax())
    assert np.allclose(np.sort(a.entropy[a.label == c0]), np.sort(h[y == c0])[:40])


def test_gda_recovers_gaussian_classes_and_uses_text_for_empty_classes():
    mu, t, g = world(C=4, D=8)
    y = g.integers(0, 3, 600)  # class 3 never appears
    f = unit(mu[y] + 0.2 * g.normal(size=(600, 8)))
    probs = np.eye(4)[y]
    W, b = M.gda_fit(f, probs, t)
    assert W.shape == (8, 4) and b.shape == (4,)
    assert ((f @ W + b).argmax(1) == y).mean() > 0.95
    # the empty class keeps the text embedding as its mean: its logit is linear in t_3
    W2, _ = M.gda_fit(f, probs, t * np.array([[1], [1], [1], [2]]))
    assert np.allclose(W2[:, 3], 2 * W[:, 3]) and np.allclose(W2[:, :3], W[:, :3])


def test_refine_keeps_confident_subset():
    mu, t, g = world(C=3, D=8)
    y = g.integers(0, 3, 300)
    f = unit(mu[y] + 0.4 * g.normal(size=(300, 8)))
    W, b = M.gda_fit(f, np.eye(3)[y], t)
    rf, rq = M.refine(f, W, b, tau_d=1.0)
    assert 0 < len(rf) < len(f) and rq.shape == (len(rf), 3)
    assert np.allclose(rq.sum(1), 1)


def test_aggregations():
    q = np.zeros((1, 4, 2))
    q[0, :, 0] = [0.1, 0.1, 0.1, 0.9]
    q[0, :, 1] = [0.4, 0.4, 0.4, 0.4]
    assert np.allclose(M.aggregate(q, "max"), [[0.9, 0.4]])
    assert np.allclose(M.aggregate(q, "mean"), [[0.3, 0.4]])
    lse = M.aggregate(q, "lse", lse_beta=10.0)
    assert 0.3 < lse[0, 0] < 0.9 and np.isclose(lse[0, 1], 0.4)
    assert np.allclose(M.aggregate(q, "lse", lse_beta=1e4), M.aggregate(q, "max"), atol=1e-3)
    with pytest.raises(ValueError):
        M.aggregate(q, "median")


def test_tier_a_gda_on_a_correct_bank_closes_a_modality_gap():
    """Known gap: text embeddings shifted from the image class means by a common offset plus a per-class
    distortion. GDA fitted on (correctly pseudo-labelled) image patches puts the class means back in
    image space, so it classifies patches the text classifier confuses."""
    g = np.random.default_rng(1)
    C, D = 5, 16
    mu = unit(g.normal(size=(C, D)))
    t = unit(mu + 1.2 * unit(g.normal(size=D)) + 0.8 * g.normal(size=(C, D)))
    y = g.integers(0, C, 2000)
    f = unit(mu[y] + 0.1 * g.normal(size=(2000, D)))
    W, b = M.gda_fit(f[:1000], np.eye(C)[y[:1000]], t)
    acc_gda = ((f[1000:] @ W + b).argmax(1) == y[1000:]).mean()
    acc_txt = ((f[1000:] @ t.T).argmax(1) == y[1000:]).mean()
    from paperflow.nn.vision import modality_gap
    assert modality_gap(f, t) > 0.5
    assert acc_gda > 0.95 and acc_txt < acc_gda - 0.1, (acc_gda, acc_txt)


def test_tier_a_pvcl_end_to_end_under_a_pure_shift_gap():
    """Pseudo-label → streaming banks → GDA → refinement on patches of multi-object images whose text
    embeddings sit behind a common offset: the learnt classifier labels patches correctly."""
    mu, t, g = world(C=5, D=16, gap=1.2, seed=0)
    labels = [g.choice(5, size=g.integers(1, 3), replace=False) for _ in range(400)]
    train = patches_of(mu, labels, g)
    p, bank = M.learn_pvcl(iter([train[i:i + 50].reshape(-1, 16) for i in range(0, 400, 50)]), t, k=200,
                           tau_pl=60.0, tau_d=1.0, merge_every=2)
    assert 0 < p.refined_size < p.bank_size <= 5 * 200
    test = patches_of(mu, [g.choice(5, size=2, replace=False) for _ in range(100)], g).reshape(-1, 16)
    own = (test @ mu.T).argmax(1)
    assert ((test @ p.W + p.b).argmax(1) == own).mean() > 0.95


def test_tier_a_entanglement_index_tracks_rho():
    mu, _, g = world(C=6, D=16, seed=2)
    labels = [g.choice(6, size=2, replace=False) for _ in range(60)]
    owner = np.tile(np.repeat([0, 1], 4), (60, 1))
    ocls = np.array(labels)
    res = []
    for rho in (0.0, 0.6):
        g2 = np.random.default_rng(3)
        pats = np.empty((60, 8, 16))
        for n, labs in enumerate(labels):
            own = np.repeat(labs, 4)
            pats[n] = unit((1 - rho) * mu[own] + rho * mu[labs].mean(0) + 0.05 * g2.normal(size=(8, 16)))
        res.append(ev.entanglement(pats, owner, ocls, seed=0))
    assert res[1]["excess"] > res[0]["excess"] + 0.2
    assert abs(res[0]["excess"]) < 0.15


def test_map_by_tercile_uses_only_the_bin_positives():
    y = np.array([[1], [1], [0], [0]])
    area = np.array([[1.0], [10.0], [0.0], [0.0]])
    s = np.array([[0.1], [0.9], [0.5], [0.2]])  # the small object ranks below both negatives
    out = ev.map_by_tercile(y, s, area, (2.0, 5.0))
    assert out["small"] == pytest.approx(1 / 3) and out["large"] == pytest.approx(1.0)
    assert np.isnan(out["medium"])
