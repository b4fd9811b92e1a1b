import numpy as np
import pytest

from paperflow.quantization.ilaamp import brute_force, chain_dp, objective


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("L", [1, 3, 5])
def test_chain_dp_matches_brute_force_and_respects_budget(seed, L):
    rng = np.random.default_rng(seed)
    bits = [2, 4, 6, 8]
    d = np.abs(rng.normal(size=(L, 4))) * np.array([3.0, 1.0, 0.3, 0.0])
    k = rng.normal(scale=0.3, size=(L, 4, 4))
    k[0] = 0
    for avg in (3, 4, 6):
        B = round(avg * L)
        assign, val = chain_dp(d, k, bits, B, 0.5)
        bf_assign, bf_val = brute_force(d, k, bits, B, 0.5)
        assert sum(assign) <= B
        assert val == pytest.approx(bf_val, abs=1e-12)
        assert objective([bits.index(b) for b in assign], d, k, 0.5) == pytest.approx(val, abs=1e-12)


def test_dp_uses_interaction_term():
    # two blocks, budget 8 (avg 4): delta prefers (2, 6) vs (6, 2) equally; kappa breaks the tie
    bits = [2, 4, 6, 8]
    d = np.array([[1.0, 0.5, 0.0, 0.0], [1.0, 0.5, 0.0, 0.0]])
    k = np.zeros((2, 4, 4))
    k[1, 0, 2] = 5.0  # (2, 6) is bad together
    assign, _ = chain_dp(d, k, bits, 8, 1.0)
    assert assign in ([6, 2], [4, 4])  # without kappa, (2, 6) would tie with these
    assert chain_dp(d, np.zeros((2, 4, 4)), bits, 8, 1.0)[1] == pytest.approx(1.0)


def test_infeasible_budget_raises():
    with pytest.raises(ValueError):
        chain_dp(np.zeros((3, 4)), np.zeros((3, 4, 4)), [2, 4, 6, 8], 5, 0.5)


# ---- issue 24: the faster sweep, activation quantizer and NLL compute the same floats as before ----------

def _act_quant_reference(x, bits, clip):
    """The out-of-place formula act_quant used until 6 December 2026."""
    import torch

    qmax = 2**bits - 1
    lo = clip * x.amin(dim=-1, keepdim=True)
    hi = clip * x.amax(dim=-1, keepdim=True)
    s = ((hi - lo) / qmax).clamp(min=1e-8)
    z = torch.round(-lo / s)
    return s * (torch.clamp(torch.round(x / s) + z, 0, qmax) - z)


@pytest.mark.parametrize("bits", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("clip", [0.5, 0.9, 1.0])
def test_act_quant_is_bit_identical_to_the_reference_formula(bits, clip):
    import torch

    from paperflow.quantization.ops import act_quant

    g = torch.Generator().manual_seed(bits)
    x = torch.randn(3, 7, 96, generator=g) * torch.logspace(-3, 2, 96)
    x[0, 0] = 0.25  # a constant row: scale clamped to 1e-8
    x_before = x.clone()
    got = act_quant(x, bits, clip)
    assert torch.equal(got, _act_quant_reference(x, bits, clip))
    assert torch.equal(x, x_before)  # the input is not modified in place
    assert got.unique().numel() > 1


def _sweep_reference(model, windows, bits, base_bits, clip, batch):
    """The sweep as written until 6 December 2026: every pair setting restarts at its first changed block."""
    from paperflow.quantization.evaluate import all_layer_inputs, nll_from_layer
    from paperflow.quantization.qmodel import set_activation_bits

    L = len(model.model.layers)
    sweep = [b for b in bits if b != base_bits]
    base = [base_bits] * L
    set_activation_bits(model, base, default_clip=clip)
    cache = all_layer_inputs(model, windows, batch, store_device="cpu")
    nll0 = nll_from_layer(model, 0, cache[0], windows)
    delta = {i: {base_bits: 0.0} for i in range(L)}
    kappa = {i: {} for i in range(1, L)}
    jobs = [(i, None, b) for i in range(L) for b in sweep]
    jobs += [(i, bp, b) for i in range(1, L) for bp in sweep for b in sweep]
    for i, bp, b in jobs:
        cfg = list(base)
        cfg[i] = b
        start = i
        if bp is not None:
            cfg[i - 1] = bp
            start = i - 1
        set_activation_bits(model, cfg, default_clip=clip)
        nll = nll_from_layer(model, start, cache[start], windows)
        if bp is None:
            delta[i][b] = nll - nll0
        else:
            kappa[i][f"{bp},{b}"] = (nll - nll0) - delta[i - 1][bp] - delta[i][b]
    return nll0, delta, kappa, 1 + len(jobs)


def test_sweep_equals_the_restarting_sweep_exactly(tiny_llama_factory):
    import json

    import torch

    from paperflow.quantization.evaluate import mean_nll
    from paperflow.quantization.ilaamp import sensitivity_sweep
    from paperflow.quantization.qmodel import set_activation_bits

    model = tiny_llama_factory(4)
    win = torch.randint(0, 64, (5, 12), generator=torch.Generator().manual_seed(3))
    bits = [2, 4, 6, 8]
    got = sensitivity_sweep(model, win, bits, 8, 0.9, 2)
    nll0, delta, kappa, n_evals = _sweep_reference(model, win, bits, 8, 0.9, 2)
    assert got["nll0"] == nll0 and got["n_evals"] == n_evals == 1 + 3 * 4 + 9 * 3
    assert got["delta"] == {str(i): {str(b): v for b, v in d.items()} for i, d in delta.items()}
    for i in range(1, 4):
        assert {k: v for k, v in got["kappa"][str(i)].items() if "8" not in k.split(",")} == kappa[i]
    assert any(v != 0.0 for d in kappa.values() for v in d.values())
    # key order of the written JSON is unchanged as well (sens.json byte-identical)
    assert list(got["kappa"]["1"])[:9] == list(kappa[1])
    # and a pair's NLL is the plain full forward pass of that setting
    set_activation_bits(model, [8, 2, 6, 8], default_clip=0.9)
    full = mean_nll(model, win, 2)
    assert got["kappa"]["2"]["2,6"] + got["delta"]["1"]["2"] + got["delta"]["2"]["6"] + nll0 == pytest.approx(full, rel=1e-9, abs=1e-12)
    json.dumps(got)


def test_mean_nll_equals_cross_entropy_twice(tiny_llama):
    import torch
    from torch.nn import functional as F

    from paperflow.quantization.evaluate import mean_nll

    win = torch.randint(0, 64, (5, 9), generator=torch.Generator().manual_seed(4))
    per: list[float] = []
    got = mean_nll(tiny_llama, win, 2, per)
    tot, cnt, ref_per = 0.0, 0, []
    with torch.no_grad():
        for s in range(0, 5, 2):
            ids = win[s:s + 2]
            logits = tiny_llama(ids, use_cache=False).logits[:, :-1].to(torch.float64)
            fl, fi = logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)
            tot += float(F.cross_entropy(fl, fi, reduction="sum"))
            cnt += fi.numel()
            ref_per.extend(float(v) for v in F.cross_entropy(fl, fi, reduction="none").reshape(ids.shape[0], -1).mean(dim=1))
    assert got == tot / cnt
    assert per == ref_per and len(per) == 5
