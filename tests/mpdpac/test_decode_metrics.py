"""The LLaDA low-confidence decoder and the caption metrics (hand cases)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from paperflow.mpdpac.data import Vocab
from paperflow.mpdpac.decode import decode, distance_bins, distance_edges, transfer_schedule
from paperflow.mpdpac.fixes import paper_prior
from paperflow.mpdpac.metrics import distinct2, dup_rate, item_stats, parse_objects, prf, truncate

SPECIAL = {"mask": 0, "eos": 1, "sep": 2, "bg": 3, "comma": 4}


def test_transfer_schedule():
    assert transfer_schedule(10, 3) == [4, 3, 3]
    assert sum(transfer_schedule(48, 12)) == 48 and set(transfer_schedule(48, 12)) == {4}


@pytest.mark.parametrize("L,tps,block", [(6, 1, 0), (8, 4, 0), (8, 3, 4)])
def test_decode_fills_every_slot_and_records_diagnostics(tiny_model, L, tps, block):
    pr = paper_prior(tiny_model, 2)
    vis = torch.tensor([[3, 3, 5 + 6, 3, 3, 3, 3, 3, 3], [5 + 7, 3, 3, 3, 3, 3, 3, 3, 5 + 8]])
    out = decode(tiny_model, vis, answer_len=L, tokens_per_step=tps, block_len=block, special=SPECIAL,
                 diag_prior=pr, mps_prior=pr, lam=1.0, attention=True)
    assert out.answer.shape == (2, L) and not (out.answer == 0).any()
    steps = out.cos.shape[1]
    blk = block or L
    assert steps == (L // blk) * -(-blk // tps)
    masked_per_step = (~np.isnan(out.cos)).sum(axis=2)  # [B, steps]: slots still masked at each step
    assert (masked_per_step[:, 0] == L).all() and (np.diff(masked_per_step, axis=1) < 0).all()
    assert out.vis_attn.shape == (2, 3, steps) and (out.vis_attn > 0).all() and (out.vis_attn <= 1 + 1e-6).all()
    assert (out.obj_attn <= out.vis_attn + 1e-6).all()
    # by distance: the bins partition the keys (mass sums to 1 per query), masked keys are a part of it
    assert out.dist_attn.shape[:3] == (2, 3, steps)
    assert np.allclose(out.dist_attn.sum(axis=-1), 1.0, atol=1e-5)
    assert (out.dist_mask_attn <= out.dist_attn + 1e-6).all() and (out.dist_mask_attn[:, :, -1] >= 0).all()
    assert out.dist_mask_attn[:, :, 0, 0].min() > 0  # at step 0 every answer query is a masked key itself


def test_distance_bins_by_hand():
    assert distance_edges(20) == [0, 1, 2, 4, 8, 16]
    oh = distance_bins(6, start=4)  # queries 4, 5; keys 0..5
    assert oh.shape == (2, 6, 4) and torch.equal(oh.sum(-1), torch.ones(2, 6))
    assert oh[0].argmax(-1).tolist() == [3, 2, 2, 1, 0, 1]  # |4 − k| = 4, 3, 2, 1, 0, 1 → bins 4+, 2–3, 2–3, 1, 0, 1
    assert oh[1].argmax(-1).tolist() == [3, 3, 2, 2, 1, 0]


def test_decode_is_deterministic_and_mps_changes_nothing_at_lambda_zero(tiny_model):
    pr = paper_prior(tiny_model, 2)
    vis = torch.tensor([[3, 3, 11, 3, 3, 3, 12, 3, 3]])
    kw = dict(answer_len=6, tokens_per_step=2, block_len=0, special=SPECIAL, diag_prior=pr)
    a = decode(tiny_model, vis, **kw)
    b = decode(tiny_model, vis, mps_prior=pr, lam=0.0, **kw)
    assert np.array_equal(a.answer, b.answer) and np.allclose(a.cos, b.cos, equal_nan=True)


def test_metrics_hand_cases():
    v = Vocab(3, 3)
    red, green, circle, square = v.colour(0), v.colour(1), v.shape(0), v.shape(1)
    cm, eos = v.comma, v.eos
    # red circle , red circle , green square , EOS green circle  → objects before EOS only
    a = [red, circle, cm, red, circle, cm, green, square, cm, eos, green, circle]
    assert truncate(a, eos) == a[:9]
    assert parse_objects(truncate(a, eos), v) == [(0, 0), (0, 0), (1, 1)]
    b = [green, circle, cm, eos, eos, eos, eos, eos, eos, eos, eos, eos]
    answers = np.array([a, b])
    objects = np.array([[[0, 0], [1, 1], [-1, -1]], [[1, 0], [2, 2], [-1, -1]]])
    st = item_stats(answers, objects, np.array([2, 2]), v)
    assert st["n_pred"].tolist() == [3, 1] and st["n_dup"].tolist() == [1, 0] and st["n_tp"].tolist() == [2, 1]
    assert dup_rate(st) == pytest.approx(1 / 4)
    P, R, F = prf(st)
    assert (P, R) == pytest.approx((3 / 4, 3 / 4)) and F == pytest.approx(0.75)
    # bigrams of a: 8, distinct: (r,c),(c,,),(,,r),(,,g),(g,s),(s,,) = 6 → seq-rep-2 = 1 − 6/8
    assert st["seq_rep2"][0] == pytest.approx(0.25) and st["seq_rep2"][1] == 0.0
    assert distinct2(answers, eos) == pytest.approx(len({*zip(a[:8], a[1:9]), (green, circle), (circle, cm)}) / 10)


def test_shuffled_image_control_never_decodes_an_item_from_its_own_scene():
    """Issue 17 grounding control: every item gets another scene's visual tokens (a derangement), the main
    conditions run it once (vanilla decoding), the MRS conditions do not."""
    from paperflow.core.config import validate_config
    from paperflow.mpdpac import plan
    from paperflow.mpdpac.evaluate import shuffled_visual

    vis = torch.arange(5 * 4).view(5, 4)
    sh = shuffled_visual(vis)
    assert sorted(sh[:, 0].tolist()) == sorted(vis[:, 0].tolist())
    assert all(not torch.equal(sh[i], vis[i]) for i in range(5)) and torch.equal(sh[0], vis[1])
    cfg = validate_config({"results_dir": "r", "data_dir": "d", "models_dir": "m", "mpdpac": {"enabled": True}})
    main = [a for a in plan.arms(cfg["mpdpac"], "main") if a.get("shuffle")]
    assert [a["name"] for a in main] == [plan.SHUFFLED] and main[0]["lam"] == 0 and main[0]["beta"] == 0
    assert not any(a.get("shuffle") for a in plan.arms(cfg["mpdpac"], "mrs"))


def test_answer_slots_see_the_visual_prefix(tiny_model):
    """Issue 17 audit: answer queries attend to visual keys (bidirectional, no mask) and their logits change
    with the scene; the prefix comes first, so answer positions start at grid² + 1 in training and decoding."""
    from paperflow.mpdpac.model import build_inputs

    a, b = torch.full((1, 9), 3), torch.full((1, 9), 3)
    b[0, 4] = 17
    ids_a, start = build_inputs(a, 6, SPECIAL["sep"], SPECIAL["mask"], SPECIAL["bg"])
    ids_b, _ = build_inputs(b, 6, SPECIAL["sep"], SPECIAL["mask"], SPECIAL["bg"])
    assert start == 10
    with torch.no_grad():
        st = tiny_model.states(ids_a, output_attentions=True)
        la, lb = tiny_model(ids_a)[:, start:], tiny_model(ids_b)[:, start:]
    assert all(float(w[:, :, start:, : start - 1].sum(-1).min()) > 0.05 for w in st.attentions)
    assert float((la - lb).abs().max()) > 1e-4
