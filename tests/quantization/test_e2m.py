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


def _column_loop_gptq(W, H, block, damp=0.1, iters=15):
    """GPTQ's error feedback as the usual column-by-column loop (reference for the solve in e2m_gptq)."""
    from paperflow.quantization.ops import fp16_round, ternary_dequant

    W = W.clone().to(torch.float64)
    m, n = W.shape
    Hdamp = 2 * H + damp * torch.mean(torch.diagonal(2 * H)) * torch.eye(n, dtype=torch.float64)
    U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(Hdamp)), upper=True)
    codes, mus, alphas = [], [], []
    for b0 in range(0, n, block):
        b1 = min(n, b0 + block)
        Wb = W[:, b0:b1]
        t, mu, a = e2m_stage1(Wb, iters)
        a, mu = e2m_stage2(Wb, t, mu, a, H[b0:b1, b0:b1], iters)
        mu, a = fp16_round(mu.to(torch.float32)), fp16_round(a.to(torch.float32))
        Qb = ternary_dequant(t.to(torch.int8), mu[:, None], a[:, None], block).to(torch.float64)
        Err = torch.zeros_like(Wb)
        for j in range(b1 - b0):
            err = (Wb[:, j] - Qb[:, j]) / U[b0 + j, b0 + j]
            Wb[:, j + 1:] -= err[:, None] * U[b0 + j, b0 + j + 1:b1][None, :]
            Err[:, j] = err
        W[:, b1:] -= Err @ U[b0:b1, b1:]
        codes.append(t.to(torch.int8))
        mus.append(mu)
        alphas.append(a)
    return torch.cat(codes, 1), torch.stack(mus, 1), torch.stack(alphas, 1)


def test_gptq_triangular_solve_equals_the_column_loop():
    """e2m_gptq solves GPTQ's in-block recursion in one triangular solve: same codes as the column loop,
    and the same fp16 offsets and scales."""
    g = torch.Generator().manual_seed(4)
    W = torch.randn(24, 96, generator=g) * 0.05
    _, H = _H(96, 5)
    rec = e2m_gptq(W, H, block=32)
    ref_codes, ref_mu, ref_alpha = _column_loop_gptq(W, H, block=32)
    assert torch.equal(rec.t, ref_codes)
    assert torch.equal(rec.mu, ref_mu) and torch.equal(rec.alpha, ref_alpha)
    # with no feedback at all the codes differ: the test can tell the two apart
    assert not torch.equal(e2m_gptq(W, H, block=32, gptq=False).t, ref_codes)


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
