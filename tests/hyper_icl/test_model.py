"""Student modules: start as the zero-shot model, only their own parameters train, parameter counts match."""

import numpy as np
import pytest
import torch

from paperflow.hyper_icl.data import load_split
from paperflow.hyper_icl.model import (BOS, QRY, Student, build_base, check_param_band, icl_inputs, qry_positions,
                                       query_inputs, sequences)
from paperflow.hyper_icl.train import (ARMS, EVAL_ONLY, param_band, run_arms, train_base, train_student,
                                       teacher_outputs)

from .conftest import adapter_params, default_section

KINDS = ["shift", "vkv", "logit_fixed", "logit_adaptive", "lora"]


def test_sequence_layout():
    vis = torch.randn(2, 3, 5)
    lab = torch.tensor([[1, 2, 0], [3, 4, 0]])
    x = sequences(vis, lab)
    assert x.shape == (2, 9, 5 + 11)
    assert x[0, 0, 5 + BOS] == 1 and torch.equal(x[0, 1, :5], vis[0, 0]) and x[0, 2, 5 + QRY] == 1
    assert x[0, 3, 5 + 1] == 1 and x[1, 6, 5 + 4] == 1  # demo answers; the query's label is never an input
    assert qry_positions(3) == [2, 5, 8] and x[:, 8, 5 + QRY].eq(1).all()
    q = query_inputs(vis[:, -1])
    assert torch.equal(q, icl_inputs(vis[:, :0], lab[:, :0], vis[:, -1]))
    assert torch.equal(q[:, 1:], x[:, -2:])  # student query positions = the teacher's last two


@pytest.mark.parametrize("kind", KINDS)
def test_student_starts_as_zero_shot_and_trains_only_its_modules(kind):
    torch.manual_seed(0)
    p = adapter_params()
    base = build_base(32, p)
    for prm in base.parameters():
        prm.requires_grad_(False)
    st = Student(base, kind, p)
    x = query_inputs(torch.randn(8, 32))
    with torch.no_grad():
        assert torch.allclose(st(x).logits, base(x).logits, atol=1e-6)  # V = 0 / zero gates / LoRA B = 0
    names = [n for n, q in st.named_parameters() if q.requires_grad]
    assert names and all(("lora_" in n) if kind == "lora" else ("blocks" not in n or "attn." in n) for n in names)
    assert not any(n.endswith(("qkv.weight", "qkv.bias", "proj.weight", "fc.weight")) and "lora" not in n
                   for n in names)


def test_shift_sites_add_vectors_at_the_residual_stream_and_the_attention_output():
    torch.manual_seed(0)
    base = build_base(32, adapter_params())
    x = query_inputs(torch.randn(4, 32))
    for sites in (["residual"], ["attn_out"], ["residual", "attn_out"]):
        st = Student(base, "shift", adapter_params(shift_sites=sites))
        names = {n for n, q in st.named_parameters() if q.requires_grad}
        assert ("shift" in names) == ("residual" in sites)
        assert any(n.endswith("attn.shift") for n in names) == ("attn_out" in sites)
        with torch.no_grad():
            for q in st.trainable():
                q.normal_()
            assert not torch.allclose(st(x).logits, base(x).logits, atol=1e-4)
    with pytest.raises(ValueError, match="shift_sites"):
        Student(base, "shift", adapter_params(shift_sites=["mlp"]))


def test_lora_arm_uses_peft():
    p = adapter_params()
    st = Student(build_base(32, p), "lora", p)
    from peft.tuners.lora import LoraLayer

    assert sum(isinstance(m, LoraLayer) for m in st.modules()) == 3


def test_adaptive_gate_depends_on_the_query():
    p = adapter_params()
    st = Student(build_base(32, p), "logit_adaptive", p)
    attn = st.net.blocks[0].attn
    with torch.no_grad():
        attn.gate.w1.weight.normal_()
        g = attn.gate(torch.randn(2, 3, 64))
    assert g.shape == (2, 4, 3, 1) and not torch.allclose(g[0], g[1])
    assert torch.all((g > 0) & (g < 1))


def _default_arms_params() -> dict:
    from paperflow.hyper_icl.plan import arms_params

    return arms_params(default_section(), seed=0, chunk=0)


def test_default_parameter_counts_within_2x_of_the_gated_adapter():
    p = _default_arms_params()
    base = build_base(default_section()["data"]["vis_dim"], p)
    band = param_band(base, p)
    assert set(band) == set(ARMS) - set(EVAL_ONLY)
    ref = Student(base, "logit_adaptive", p).n_trainable()
    for arm, b in band.items():
        assert b["n_params"] == Student(base, ARMS[arm][0], p).n_trainable() > 0
        assert 1 / p["max_param_ratio"] <= b["n_params"] / ref <= p["max_param_ratio"], band
    # (c): one vector per query position at every hidden state 0..L and every attention output
    L, P, D = p["layers"], 3, p["d_model"]
    assert band["shift"]["n_params"] == (L + 1) * P * D + L * P * D


@pytest.mark.parametrize("change, culprit", [({"shift_sites": ["residual"]}, "shift"),  # LIVE form alone: 0.33×
                                             ({"lora_rank": 8}, "lora"), ({"vkv_slots": 1}, "vkv"),
                                             ({"gate_hidden": 16}, "logit_fixed")])  # (f) grows: (e) falls out
def test_param_band_raises_when_a_config_leaves_it(change, culprit):
    p = {**_default_arms_params(), **change}
    base = build_base(32, p)
    with pytest.raises(ValueError, match=rf"outside \[0.50×, 2×\].*{culprit}: \d+ parameters"):
        param_band(base, p)
    assert param_band(base, {**p, "max_param_ratio": 100.0})  # the band, not the modules, failed


def test_param_band_only_checks_the_configured_arms_but_always_against_f():
    p = {**_default_arms_params(), "shift_sites": ["residual"], "arms": ["teacher", "vkv"]}
    band = param_band(build_base(32, p), p)
    assert set(band) == {"vkv"} and band["vkv"]["ratio"] == pytest.approx(1548 / 2346, abs=1e-4)
    with pytest.raises(ValueError, match="shift"):
        param_band(build_base(32, p), {**p, "arms": ["shift"]})


def test_check_param_band_edges():
    assert check_param_band({"logit_adaptive": 100, "a": 50, "b": 200}, 2.0) == {"logit_adaptive": 1.0, "a": 0.5,
                                                                                   "b": 2.0}
    with pytest.raises(ValueError, match="a: 49 parameters = 0.49×"):
        check_param_band({"logit_adaptive": 100, "a": 49}, 2.0)
    with pytest.raises(ValueError, match="reference"):
        check_param_band({"a": 49}, 2.0)


def test_distillation_arms_run_and_lorentz_differs_from_euclid(world):
    torch.manual_seed(0)
    p = adapter_params(d_model=16, heads=2, layers=1, distill_layers=[0, 1])
    base = build_base(32, p)
    ep = load_split(world, "T1_train")
    tl, th = teacher_outputs(base, ep, p["distill_layers"])
    assert tl.shape == (48, 9) and th.shape == (48, 2, 2, 16)
    outs = {}
    for arm in ("gated_euclid", "gated_lorentz"):
        st, hist = train_student(arm, base, p, ep, tl, th, seed=0)
        assert hist[-1]["dist"] > 0
        outs[arm] = torch.cat([q.detach().flatten() for q in st.trainable()])
    assert not torch.allclose(outs["gated_euclid"], outs["gated_lorentz"])


def test_run_arms_reports_every_metric(world):
    p = {**adapter_params(d_model=16, heads=2, layers=1, distill_layers=[1]), "warm_colours": [0, 1, 2]}
    base = build_base(32, p)
    data = {s: load_split(world, f"T2_{s}") for s in ("train", "val", "test")}
    res = run_arms(list(ARMS), base, p, data, "T2", [0, 1, 2], seed=0)
    assert set(res) == set(ARMS)
    for a, r in res.items():
        assert 0 <= r["acc"] <= 1 and len(r["correct"]) == 20
        assert (r["n_params"] == 0) == (a in EVAL_ONLY)
        assert 0 <= r["fine_acc"] <= 1
    assert res["teacher"]["n_draws"] == 3 and res["teacher"]["tokens_per_query"] == 15
    assert res["logit_gated"]["demo_std"] == 0.0 and res["logit_gated"]["demo_std_by_construction"]
    assert res["zero_shot"]["tokens_per_query"] == 3


def test_base_training_resumes_exactly(world, tmp_path):
    p = {"d_model": 16, "heads": 2, "layers": 1, "steps": 6, "batch_size": 16, "lr": 0.003, "weight_decay": 0.01,
         "warmup": 0.1, "ckpt_every": 3}
    ep = load_split(world, "pretrain")
    full, _ = train_base(p, ep, 0, tmp_path / "a")
    net, _ = train_base(p, ep, 0, tmp_path / "b", stop_after=3)
    assert net is None and (tmp_path / "b").exists()
    resumed, _ = train_base(p, ep, 0, tmp_path / "b")
    for (k, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k
    assert np.isfinite(sum(float(v.sum()) for v in full.state_dict().values()))
