"""backend hf_lm on `paperflow.nn.trl_grpo.tiny_llama`: text episodes, the adapter on HF attention (starts as the
zero-shot LM, LM frozen and restored), a few training steps of every hf_lm arm, the stages end to end, paper.yaml."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from paperflow.hyper_icl.data import load_split

from .conftest import REPO, adapter_params, default_section

pytest.importorskip("transformers")
from paperflow.hyper_icl import hf_lm  # noqa: E402

HP = {"model_path": "tiny-llama", "dtype": "fp32", "distill_every": 1, "eval_batch": 16, "pretrain_steps": 0,
      "pretrain_lr": 0.003, "tiny_hidden": 32, "tiny_layers": 2, "tiny_heads": 2}


def params(**kw) -> dict:
    return {**adapter_params(adapter_steps=3), "hf_lm": dict(HP), "arms": list(hf_lm.HF_ARMS), **kw}


@pytest.fixture(scope="module")
def lm_tok():
    return hf_lm.load_lm(HP, seed=0)


def state(lm) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in lm.state_dict().items()}


def test_codec_aligns_the_query_and_reads_single_answer_tokens(lm_tok, world):
    _, tok = lm_tok
    codec = hf_lm.Codec(tok)
    assert len(set(codec.answer_ids)) == 9 and tok.convert_ids_to_tokens(codec.answer_ids) == list("012345678")
    ep = load_split(world, "T1_train")
    teach = hf_lm.episode_ids(codec, ep)
    stud = hf_lm.query_ids(codec, ep["colour"][:, -1], ep["shape"][:, -1], ep["count"][:, -1])
    q = len(codec.query(0, 0, 1))
    assert q == 4 and all(t[-q:] == s for t, s in zip(teach, stud))  # teacher's last |q| positions = the student
    text = tok.decode(teach[0])
    lab = ep["label"][0]
    assert text.count("->") == 5 and text.count(";") == 4 and f"-> {lab[0]} ;" in text
    assert str(lab[-1]) not in text.split("->")[-1]  # the query's answer is never in the input
    assert hf_lm.episode_ids(codec, ep, 0)[0] == stud[0] and len(hf_lm.episode_ids(codec, ep, 2)[0]) == 2 * 6 + 4


@pytest.mark.parametrize("kind", hf_lm.HF_KINDS)
def test_adapter_starts_as_the_zero_shot_lm_and_the_lm_is_restored(lm_tok, world, kind):
    lm, tok = lm_tok
    codec = hf_lm.Codec(tok)
    ep = load_split(world, "T2_train")
    seqs = hf_lm.query_ids(codec, ep["colour"][:6, -1], ep["shape"][:6, -1], ep["count"][:6, -1])
    seqs[0] = seqs[0][1:]  # a shorter sequence: left padding and the model's mask reach the wrapper
    before = state(lm)
    with torch.no_grad():
        z, _ = hf_lm.answer_logits(lm, codec, seqs)
    with hf_lm.adapted(lm, kind, params()) as prm:
        assert all(isinstance(layer.self_attn, hf_lm.HFAdaptedAttention) for layer in lm.model.layers)
        assert prm and all(q.requires_grad for q in prm)
        assert not any(q.requires_grad for n, q in lm.named_parameters() if ".base." in n)
        with torch.no_grad():
            a, _ = hf_lm.answer_logits(lm, codec, seqs)
            assert torch.allclose(a, z, atol=1e-6)  # V = 0: exactly the zero-shot LM
            for q in prm:
                q.normal_()
            assert not torch.allclose(hf_lm.answer_logits(lm, codec, seqs)[0], z, atol=1e-4)
    assert not any(isinstance(layer.self_attn, hf_lm.HFAdaptedAttention) for layer in lm.model.layers)
    with torch.no_grad():
        assert torch.equal(hf_lm.answer_logits(lm, codec, seqs)[0], z)
    assert all(torch.equal(v, state(lm)[k]) for k, v in before.items())


def test_every_hf_arm_trains_a_few_steps_and_reports(lm_tok, world):
    lm, tok = lm_tok
    codec = hf_lm.Codec(tok)
    before = state(lm)
    data = {s: load_split(world, f"T2_{s}") for s in ("train", "val", "test")}
    res = hf_lm.run_arms(list(hf_lm.HF_ARMS), lm, codec, params(), data, "T2", [0, 1, 2], seed=0)
    assert set(res) == set(hf_lm.HF_ARMS)
    for a, r in res.items():
        assert 0 <= r["acc"] <= 1 and len(r["correct"]) == 20 and 0 <= r["val_acc"] <= 1
        assert (r["n_params"] > 0) == (a not in ("zero_shot", "teacher"))
    assert res["teacher"]["n_draws"] == 3 and res["teacher"]["tokens_per_query"] == 4 * 6 + 4
    assert res["logit_gated"]["tokens_per_query"] == 4 and res["logit_gated"]["demo_std_by_construction"]
    for a in ("gated_euclid", "gated_lorentz", "gated_lorentz_noce"):
        assert res[a]["history"][-1]["dist"] > 0 and np.isfinite(res[a]["history"][-1]["loss"])
    assert res["logit_gated"]["history"][-1]["dist"] == 0
    assert res["logit_gated"]["n_params"] > res["logit_fixed"]["n_params"]
    assert all(torch.equal(v, state(lm)[k]) for k, v in before.items())  # the LM itself never trains


def test_hf_param_band_and_unsupported_arms(lm_tok):
    lm, _ = lm_tok
    band = hf_lm.hf_param_band(lm, params(), list(hf_lm.HF_ARMS))
    # tiny llama: 2 layers, 2 heads of 16; U, V 2·2·16·4, gate (64·2 + 2) + (2·2 + 2); fixed gate 2 scalars
    assert band["logit_gated"]["n_params"] == 2 * (256 + 130 + 6) and band["logit_fixed"]["n_params"] == 2 * 258
    with pytest.raises(ValueError, match="logit_fixed: 516 parameters"):
        hf_lm.hf_param_band(lm, params(gate_hidden=16), list(hf_lm.HF_ARMS))
    with pytest.raises(NotImplementedError, match="lora"):
        hf_lm.hf_param_band(lm, params(), ["teacher", "lora"])


def test_pretraining_is_for_the_tiny_lm_only_and_refreezes(world):
    lm, tok = hf_lm.load_lm(HP, seed=1)
    codec = hf_lm.Codec(tok)
    before = state(lm)
    hist = hf_lm.pretrain(lm, codec, load_split(world, "pretrain"), {**HP, "pretrain_steps": 2}, 1, 0.01, 16)
    assert len(hist) == 2 and all(np.isfinite(h["loss"]) for h in hist)
    assert any(not torch.equal(v, state(lm)[k]) for k, v in before.items())
    assert not any(q.requires_grad for q in lm.parameters()) and not lm.training
    with pytest.raises(ValueError, match="tiny-llava only"):
        hf_lm.pretrain(lm, codec, load_split(world, "pretrain"), {**HP, "pretrain_steps": 1, "model_path": "/x"},
                       1, 0.01, 16)
    curve = hf_lm.icl_curve(lm, codec, load_split(world, "pretrain_val"), 8)["all"]
    assert len(curve) == 5 and all(0 <= a <= 1 for a in curve)


def test_stages_run_the_hf_lm_backend_end_to_end(world, tmp_path):
    from paperflow.hyper_icl import plan, stages

    cfg = default_section()
    cfg.update(backend="hf_lm", arms=["zero_shot", "teacher", "logit_gated", "gated_lorentz"], arms_per_job=4)
    cfg["hf_lm"].update(pretrain_steps=2, eval_batch=16)
    cfg["adapter"].update(adapter_steps=2, adapter_batch=16)
    cfg["model"].update(d_model=16, heads=2, layers=1)  # unused by hf_lm; the tiny LM's size is hf_lm.tiny_*
    cfg["base"].update(batch_size=16)
    bp = plan.base_params(cfg, 0)
    assert bp["hf_lm"]["model_path"] == "tiny-llama" and "hf_lm" not in plan.base_params(default_section(), 0)
    w, b = tmp_path / "base.safetensors", tmp_path / "base.json"
    stages.base(bp, data=world, weights=w, out=b, ckpt=tmp_path / "ckpt")
    assert len(json.loads(b.read_text())["icl_curve"]["all"]) == 5
    out = tmp_path / "arms.json"
    stages.arms(plan.arms_params(cfg, 0, 0), data=world, weights=w, out=out)
    r = json.loads(out.read_text())
    assert set(r["targets"]) == {"T1", "T2"} and set(r["param_band"]) == {"logit_gated", "gated_lorentz"}
    assert set(r["targets"]["T1"]["arms"]) == set(cfg["arms"])
    from paperflow.hyper_icl.report import aggregate_runs, claims

    m = aggregate_runs([r], [json.loads(b.read_text())])
    assert len(claims(m, cfg)) == 7  # the report is shared with the tiny backend
    from paperflow.hyper_icl.report import write

    write(m, cfg, tmp_path / "summary.md", [])
    text = (tmp_path / "summary.md").read_text()
    assert "Backend hf_lm" in text and "tiny_llama" in text and "virtual KV slots" not in text


def test_paper_config_names_the_lm_and_gpu_requests():
    from paperflow.core.config import load_config

    c = load_config(REPO / "config" / "paper.yaml")["hyper_icl"]
    assert c["backend"] == "hf_lm" and c["hf_lm"]["model_path"].startswith("/cluster/models/")
    assert set(c["arms"]) <= set(hf_lm.HF_ARMS) and c["hf_lm"]["dtype"] == "bf16"
    for st in ("base", "arms"):
        assert c["resources"][st]["gpu"] == 1
