import torch

from paperflow.quantization.e2m import e2m_gptq, e2m_stage1, e2m_stage2, output_error, rtn_ternary
from paperflow.quantization.ops import act_quant


def _H(n, seed=0, N=500):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g) / n**0.5 + torch.eye(n)
    X = torch.randn(N, n, generator=g) @ A + 0.3 * torch.randn(n, generator=g)
    return X, (X.T @ X / N).to(torch.float64)


def test_stage2_never_increases_output_error():
    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        w = (torch.randn(16, 32, generator=g) * 0.05 + 0.01).to(torch.float64)
        _, S = _H(32, seed)
        t, mu, a = e2m_stage1(w)
        e1 = output_error(w, mu[:, None] + a[:, None] * t, S)
        a2, mu2 = e2m_stage2(w, t, mu, a, S)
        e2 = output_error(w, mu2[:, None] + a2[:, None] * t, S)
        assert (e2 <= e1 * (1 + 1e-9) + 1e-15).all()
        assert (e2 < e1).any()


def test_at_most_three_levels_per_row_block():
    W = torch.randn(8, 96, generator=torch.Generator().manual_seed(1))
    _, H = _H(96)
    rec = e2m_gptq(W, H, block=32)
    What = rec.dequant()
    for b0 in range(0, 96, 32):
        for row in What[:, b0:b0 + 32]:
            assert len(torch.unique(row)) <= 3


def test_gptq_feedback_lowers_layer_output_error():
    g = torch.Generator().manual_seed(2)
    W = torch.randn(32, 128, generator=g) * 0.05
    X, H = _H(128, 3)

    def out_err(rec):
        return float(((X @ (W - rec.dequant()).T) ** 2).mean())

    full = out_err(e2m_gptq(W, H, block=32))
    assert full < out_err(e2m_gptq(W, H, block=32, gptq=False))
    # (stage 2 vs stage 1 inside GPTQ is an empirical question: measured by the pipeline, not asserted)
    assert full < out_err(rtn_ternary(W))


def test_act_quant_levels_and_passthrough():
    x = torch.randn(5, 40, generator=torch.Generator().manual_seed(4))
    assert torch.equal(act_quant(x, 16, 0.9), x)
    q = act_quant(x, 4, 1.0)
    for row in q:
        assert len(torch.unique(row)) <= 16
    assert (q - x).abs().max() < (x.amax(1) - x.amin(1)).max() / 15
