"""Student modules: start as the zero-shot model, only their own parameters train, parameter counts match."""

import numpy as np
import pytest
import torch

from paperflow.hyper_icl.data import load_split
from paperflow.hyper_icl.model import (BOS, QRY, Student, build_base, icl_inputs, qry_positions, query_inputs,
                                       sequences)
from paperflow.hyper_icl.train import ARMS, EVAL_ONLY, run_arms, train_base, train_student, teacher_outputs

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


def test_default_parameter_counts_within_2x_of_the_gated_adapter():
    cfg = default_section()
    p = {**cfg["model"], **cfg["adapter"]}
    base = build_base(cfg["data"]["vis_dim"], p)
    n = {k: Student(base, k, p).n_trainable() for k in KINDS}
    ratio = cfg["report"]["max_param_ratio"]
    for k in ("vkv", "logit_fixed", "lora"):
        assert 1 / ratio <= n[k] / n["logit_adaptive"] <= ratio, n
    assert n["shift"] < n["logit_adaptive"] / ratio  # LIVE's form is smaller: reported as the exception


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
