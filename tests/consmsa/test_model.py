"""The reconstructed score (JS consistency, relevance, pruning) and resumable training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from paperflow.consmsa.data import generate
from paperflow.consmsa.model import (ConsMSA, ModelConfig, ScoreConfig, combine_scores, consistency,
                                     consistency_loss, js_norm, relevance, sentiment_bin, topk_keep)
from paperflow.consmsa.train import train_variant

torch.set_num_threads(1)


def test_js_norm_bounds_symmetry():
    p = torch.tensor([[0.7, 0.2, 0.1]])
    r = torch.tensor([[0.1, 0.3, 0.6]])
    assert js_norm(p, p).item() == pytest.approx(0.0, abs=1e-6)
    assert js_norm(p, r).item() == pytest.approx(js_norm(r, p).item())
    assert js_norm(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])).item() == pytest.approx(1.0, abs=1e-4)
    assert 0 < js_norm(p, r).item() < 1


def test_a_conflicting_token_scores_lowest():
    """Two modalities agreeing on bin 0; modality a has one token on bin 2 (a conflict)."""
    agree, conflict = torch.tensor([0.9, 0.05, 0.05]), torch.tensor([0.05, 0.05, 0.9])
    qa = torch.stack([agree, agree, agree, conflict])[None]  # [1, 4, 3]
    qb = torch.stack([agree, agree])[None]
    q = {"a": qa, "b": qb}
    mask = {"a": torch.ones(1, 4), "b": torch.ones(1, 2)}
    qbar = {m: q[m].mean(1) for m in q}
    intra, inter = consistency(q, qbar, mask)
    for how in ("product", "intra", "inter", "mean"):
        s = combine_scores(intra["a"], inter["a"], how)[0]
        assert int(s.argmin()) == 3 and (s[:3] > s[3]).all()
    rel = relevance(q, qbar)  # consensus bin 0: the conflicting token has the least mass on it
    assert int(rel["a"][0].argmin()) == 3
    with pytest.raises(ValueError):
        combine_scores(intra["a"], inter["a"], "max")


def test_topk_keep_respects_padding_and_keeps_one():
    s = torch.tensor([[0.1, 0.9, 0.5, 0.99], [0.3, 0.2, 0.1, 0.0]])
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 1, 1, 1]])
    idx = topk_keep(s, mask, 0.5)
    assert idx.shape == (2, 2) and set(idx[0].tolist()) == {1, 2}  # the padded 0.99 is never kept
    assert topk_keep(s, mask, 0.01).shape == (2, 1)


def test_sentiment_bins():
    y = torch.tensor([-3.0, -2.6, -0.4, 0.0, 0.6, 3.5])
    assert sentiment_bin(y, 7).tolist() == [0, 0, 3, 3, 4, 6]


def _model(combine: str = "product") -> ConsMSA:
    torch.manual_seed(0)
    return ConsMSA(ModelConfig(input_dims={"text": 6, "audio": 4, "vision": 5}, d_model=8,
                               score=ScoreConfig(combine=combine)))


def test_forward_prunes_reweights_and_detaches_the_score():
    net = _model()
    x = {"text": torch.randn(3, 10, 6), "audio": torch.randn(3, 20, 4), "vision": torch.randn(3, 5, 5)}
    mask = {m: torch.ones(3, v.shape[1]) for m, v in x.items()}
    f = net(x, mask, reweight=True, keep=0.2, want_attn=True)
    assert f.pred.shape == (3,) and f.kept is not None
    assert [f.kept[m].shape[1] for m in x] == [2, 4, 1]  # ⌈0.2·T⌉, at least one
    assert all(not f.s[m].requires_grad for m in x)
    assert all(torch.allclose(f.q[m].sum(-1), torch.ones(1)) for m in x)
    assert all(torch.allclose(f.cls_attn[m].sum(), f.cls_attn[m].sum()) for m in x)
    # the kept tokens are the top-s ones
    top = f.s["audio"].topk(4, dim=1).indices.sort(1).values
    assert torch.equal(f.kept["audio"].sort(1).values, top)
    loss = consistency_loss(f, mask)
    loss.backward()
    assert net.head_s.weight.grad is not None and float(net.head_s.weight.grad.abs().sum()) > 0
    # pruning by another score changes which tokens are kept
    g = net(x, mask, keep=0.2, prune_by={m: -f.s[m] for m in x})
    assert not torch.equal(g.kept["audio"].sort(1).values, top)


PD = dict(dim=6, seq_len={"text": 6, "audio": 8, "vision": 8}, n_train=48, n_valid=8, n_test=8,
          informative_frac=[0.2, 0.3], redundant_frac=[0.1, 0.2], conflict_prob=0.3, conflict_tokens=[1, 1],
          informative_noise=0.3, redundant_noise=0.1, neutral_scale=1.5, seed=0)
TP = dict(variant="full_k0.5", cons=True, reweight=True, keep=0.5, combine="product", relevance="bin_mass",
          summary="mean", source="encoded", d_model=8, n_heads=2, enc_layers=1, fusion_layers=1, n_bins=7, lr=0.01,
          weight_decay=0.0, batch_size=16, epochs=3, grad_clip=1.0, tau=0.1, lambda_c=0.1, lambda_u=0.5,
          ckpt_every=1, metric_kind="mosi", controls=False, control_keeps=[])


def test_training_resumes_to_identical_weights(tmp_path: Path):
    data, _ = generate(PD, 0)
    full, hist = train_variant(TP, data["train"], 0, tmp_path / "a")
    assert full is not None and len(hist) == 3 and np.isfinite(hist[-1]["loss"])
    net, _ = train_variant(TP, data["train"], 0, tmp_path / "b", stop_after=1)
    assert net is None and (tmp_path / "b").exists()
    resumed, hist2 = train_variant(TP, data["train"], 0, tmp_path / "b")
    assert resumed is not None and [h["epoch"] for h in hist2] == [1, 2]
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k


def test_the_loss_decreases():
    data, _ = generate(PD, 0)
    _, hist = train_variant({**TP, "epochs": 6}, data["train"], 0)
    assert hist[-1]["l1"] < hist[0]["l1"]


def test_projected_source_scores_each_token_on_its_own():
    """With source 'projected' a token's q depends on that token only; 'encoded' mixes the sequence."""
    x = {"text": torch.randn(1, 6, 6), "audio": torch.randn(1, 8, 4), "vision": torch.randn(1, 5, 5)}
    mask = {m: torch.ones(1, v.shape[1]) for m, v in x.items()}
    y = {**x, "text": x["text"].clone()}
    y["text"][0, 5] += 3.0  # change one other token
    for source, same in (("projected", True), ("encoded", False)):
        torch.manual_seed(0)
        net = ConsMSA(ModelConfig(input_dims={"text": 6, "audio": 4, "vision": 5}, d_model=8,
                                  score=ScoreConfig(source=source)))
        a, b = net(x, mask).q["text"][0, 0], net(y, mask).q["text"][0, 0]
        assert torch.allclose(a, b) is same
