"""hf_lm with the items shown as images to a VLM (model_path tiny-llava / vision: true): `hf_lm.VisionCodec`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from paperflow.hyper_icl.data import load_split

from .conftest import adapter_params, default_section

pytest.importorskip("transformers")
from paperflow.hyper_icl import hf_lm  # noqa: E402

HP = {"model_path": "tiny-llava", "dtype": "fp32", "distill_every": 1, "eval_batch": 16, "pretrain_steps": 0,
      "pretrain_lr": 0.003, "tiny_hidden": 32, "tiny_layers": 2, "tiny_heads": 2, "vision": False, "image_size": 56}


@pytest.fixture(scope="module")
def vlm():
    lm, proc = hf_lm.load_lm(HP, seed=0)
    return lm, hf_lm.make_codec(proc, HP)


def test_items_are_images_and_the_query_aligns(vlm, world):
    _, codec = vlm
    assert isinstance(codec, hf_lm.VisionCodec) and codec.n_img == 4  # (28 / 14)² patch tokens per image
    ep = load_split(world, "T1_train")
    teach = hf_lm.episode_ids(codec, ep)
    stud = hf_lm.query_ids(codec, ep["colour"][:, -1], ep["shape"][:, -1], ep["count"][:, -1])
    q = len(codec.query(0, 0, 1))
    assert q == codec.n_img + 1 and all(t[-q:] == s for t, s in zip(teach, stud))
    ids, _ = hf_lm.pad_left(teach[:3], int(codec.tok.pad_token_id))
    model_ids, extra = codec.model_inputs(ids)
    assert int((model_ids >= codec.image_base).sum()) == 0
    assert int((model_ids == codec.image_token).sum()) == 3 * 5 * codec.n_img  # 4 demos + the query, 3 rows
    assert extra["pixel_values"].shape[0] == 3 * 5
    # the first image of row 0 is its first demo's item, drawn from its attributes
    first = hf_lm.item_image(int(ep["colour"][0, 0]), int(ep["shape"][0, 0]), int(ep["count"][0, 0]), 56)
    px = codec.processor.image_processor([first], return_tensors="pt")["pixel_values"]
    assert torch.equal(px[0], extra["pixel_values"][0])
    a, b = np.asarray(hf_lm.item_image(0, 0, 1, 56)), np.asarray(hf_lm.item_image(1, 2, 3, 56))
    assert not np.array_equal(a, b) and (a != 255).any()


def test_adapter_on_the_vlms_language_model_starts_as_zero_shot(vlm, world):
    lm, codec = vlm
    ep = load_split(world, "T2_train")
    seqs = hf_lm.query_ids(codec, ep["colour"][:4, -1], ep["shape"][:4, -1], ep["count"][:4, -1])
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    p = {**adapter_params(adapter_steps=2), "hf_lm": dict(HP)}
    with torch.no_grad():
        z, _ = hf_lm.answer_logits(lm, codec, seqs)
    with hf_lm.adapted(lm, "logit_adaptive", p) as prm:
        assert all(isinstance(layer.self_attn, hf_lm.HFAdaptedAttention) for layer in hf_lm._layers(lm))
        with torch.no_grad():
            assert torch.allclose(hf_lm.answer_logits(lm, codec, seqs)[0], z, atol=1e-6)
            for q in prm:
                q.normal_()
            assert not torch.allclose(hf_lm.answer_logits(lm, codec, seqs)[0], z, atol=1e-4)
    assert all(torch.equal(v, lm.state_dict()[k]) for k, v in before.items())


@pytest.mark.filterwarnings("ignore")
def test_vlm_stages_end_to_end(world, tmp_path):
    from paperflow.hyper_icl import plan, stages

    cfg = default_section()
    cfg.update(backend="hf_lm", arms=["zero_shot", "teacher", "logit_gated", "gated_lorentz"], arms_per_job=4)
    cfg["hf_lm"].update(model_path="tiny-llava", pretrain_steps=2, eval_batch=16, image_size=56)
    cfg["adapter"].update(adapter_steps=2, adapter_batch=16)
    cfg["base"].update(batch_size=16)
    w, b = tmp_path / "base.safetensors", tmp_path / "base.json"
    stages.base(plan.base_params(cfg, 0), data=world, weights=w, out=b, ckpt=tmp_path / "ckpt")
    assert len(json.loads(b.read_text())["icl_curve"]["all"]) == 5
    out = tmp_path / "arms.json"
    stages.arms(plan.arms_params(cfg, 0, 0), data=world, weights=w, out=out)
    r = json.loads(out.read_text())
    assert set(r["targets"]) == {"T1", "T2"} and set(r["param_band"]) == {"logit_gated", "gated_lorentz"}
    for t in ("T1", "T2"):
        arms = r["targets"][t]["arms"]
        assert set(arms) == {"zero_shot", "teacher", "logit_gated", "gated_lorentz"}
        assert all(0 <= a["acc"] <= 1 for a in arms.values())
        assert arms["teacher"]["tokens_per_query"] > arms["zero_shot"]["tokens_per_query"] == 4 + 1
