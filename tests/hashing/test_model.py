"""Losses against direct loop implementations of the spec's formulas."""

import math

import numpy as np
import pytest
import torch

from paperflow.hashing import model as M

torch.manual_seed(0)


def unit(B, L, seed):
    g = torch.Generator().manual_seed(seed)
    return M.HashNet.embed(torch.randn(B, L, generator=g, dtype=torch.float64))


def lq(P, q):
    return (1 - q) * (1 - P ** q) / q + q * (1 - P)


def test_prototypes_unit_columns_and_orthogonal_when_possible():
    g = torch.Generator().manual_seed(0)
    W = M.prototypes(32, 20, g)
    assert torch.allclose(W.T @ W, torch.eye(20), atol=1e-5)
    W2 = M.prototypes(16, 20, torch.Generator().manual_seed(0))
    assert torch.allclose(W2.norm(dim=0), torch.ones(20), atol=1e-5)
    net = M.HashNet(5, 4, 8, 16, 20, 0)
    assert "W" in dict(net.named_buffers()) and all("W" not in n for n, _ in net.named_parameters())


def test_intra_code_matches_loop():
    B, tau, q = 5, 0.7, 0.01
    z1, z2 = unit(B, 8, 1), unit(B, 8, 2)
    Z = torch.cat([z1, z2])
    tot = 0.0
    for i in range(2 * B):
        s = [math.exp(float(Z[i] @ Z[j]) / tau) if j != i else 0.0 for j in range(2 * B)]
        P = s[(i + B) % (2 * B)] / sum(s)
        tot += lq(P, q)
    assert float(M.intra_code(z1, z2, tau, q)) == pytest.approx(2 * tot / (2 * B), rel=1e-9)


def test_intra_paper_matches_loop():
    B, tau, q = 4, 0.7, 0.01
    z1, z2 = unit(B, 8, 3), unit(B, 8, 4)
    S = (z1 @ z2.T).numpy()
    i2t = [np.exp(S[i, i] / tau) / np.exp(S[i] / tau).sum() for i in range(B)]
    t2i = [np.exp(S[i, i] / tau) / np.exp(S[:, i] / tau).sum() for i in range(B)]
    ref = np.mean([lq(p, q) for p in i2t]) + np.mean([lq(p, q) for p in t2i])
    assert float(M.intra_paper(z1, z2, tau, q)) == pytest.approx(ref, rel=1e-9)


def test_admissibility_code_hand_example():
    p = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]], dtype=torch.float64)
    y = torch.tensor([[1, 0, 0, 0, 0]])
    a = M.admissibility_code(p, y, kappa=2, multilabel=False)
    c = (0.2 + 0.15) / 2  # mean of the 2 largest non-label scores
    assert float(a[0, 0]) == pytest.approx((0.5 + 2 * (1 - c)) / 3)
    assert float(a[0, 3]) == pytest.approx((0.1 + 2 * (1 - 0.5)) / 3)


def test_admissibility_paper_hand_example():
    p = torch.tensor([[0.9, 0.6, 0.3]], dtype=torch.float64)
    y = torch.tensor([[0, 1, 0]])
    a = M.admissibility_paper(p, y, kappa=4, multilabel=False)
    assert float(a[0, 1]) == pytest.approx((0.6 + 4 * (1 - 0.9)) / 5)  # max over j != k
    assert float(a[0, 0]) == pytest.approx((0.9 + 0.6) / 2)  # y = 0: n = p_t as written
    assert float(a[0, 2]) == pytest.approx((0.3 + 0.6) / 2)


def test_margin_unit_weights_is_mean_hinge_over_offdiagonal_pairs():
    B, gamma = 6, 0.2
    z1, z2 = unit(B, 8, 5), unit(B, 8, 6)
    y = torch.eye(3, dtype=torch.long)[torch.tensor([0, 0, 1, 1, 2, 0])]
    h1, h2 = M.HashNet.embed(z1), M.HashNet.embed(z2)  # normalize(tanh(z)), as the code re-applies
    S = (h1 @ h2.T).numpy()
    t = y.argmax(1).numpy()
    vals = [max(0.0, gamma - (1 if t[i] == t[j] else -1) * S[i, j]) for i in range(B) for j in range(B) if i != j]
    w = torch.ones(B, dtype=torch.float64)
    assert float(M.margin(z1, z2, y, w, gamma, False, "weights")) == pytest.approx(np.mean(vals), rel=1e-9)
    assert float(M.margin(z1, z2, y, w, gamma, False, "pairs")) == pytest.approx(np.mean(vals), rel=1e-9)
    w2 = torch.tensor([1.0, 0.5, 0.2, 1.0, 0.1, 0.9], dtype=torch.float64)
    num = sum(min(w2[i], w2[j]) * max(0.0, gamma - (1 if t[i] == t[j] else -1) * S[i, j])
              for i in range(B) for j in range(B) if i != j)
    den = sum(min(w2[i], w2[j]) for i in range(B) for j in range(B) if i != j)
    assert float(M.margin(z1, z2, y, w2, gamma, False, "weights")) == pytest.approx(float(num / den), rel=1e-9)


def test_inter_paper_matches_loop():
    B, gamma, shift, tau = 5, 0.2, 1.0, 0.7
    z1, z2 = unit(B, 8, 7), unit(B, 8, 8)
    S = (z1 @ z2.T).numpy()
    ref = 0.0
    for M_ in (S, S.T):
        rows = []
        for i in range(B):
            C = [M_[i, j] if M_[i, j] >= M_[i, i] - gamma else M_[i, j] - shift for j in range(B) if j != i]
            rows.append(-M_[i, i] + tau * math.log(sum(math.exp(c / tau) for c in C)) + gamma)
        ref += np.mean(rows)
    assert float(M.inter_paper(z1, z2, gamma, shift, tau)) == pytest.approx(ref, rel=1e-9)


def test_reliability_monotone_in_gap_and_detached():
    a = torch.tensor([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[1, 0], [1, 0], [1, 0]])
    w = M.reliability_code(a, a, y, 0.7, False)
    assert not w.requires_grad and w[0] > w[1] > w[2]
    wp = M.reliability_paper(a, a, y, 0.05, 0.7, False)
    assert float(wp[0]) == pytest.approx(1 / (1 + math.exp(-(0.8 - 0.05) / 0.7)))


def test_label_loss_smoothing_and_multilabel():
    z = unit(4, 16, 9).float()
    W = M.prototypes(16, 4, torch.Generator().manual_seed(0))
    y = torch.eye(4, dtype=torch.long)
    hard = M.label_loss(z, z, W, y, 0.1, False)
    logp = torch.log_softmax(z @ W / 0.1, 1)
    assert float(hard) == pytest.approx(float(-2 * logp.diagonal().mean()), rel=1e-5)
    soft = M.label_loss(z, z, W, y, 0.1, False, eps=0.4)
    ref = -(((1 - 0.4) * y + 0.1) * logp).sum(1).mean() * 2
    assert float(soft) == pytest.approx(float(ref), rel=1e-5)
    ml = M.label_loss(z, z, W, torch.ones(4, 4, dtype=torch.long), 0.1, True)
    assert float(ml) == pytest.approx(float(2 * torch.nn.functional.softplus(-(z @ W / 0.1)).mean()), rel=1e-5)


def test_inter_code_matches_released_loop():
    """Loop transcription of the released `_inter_loss` (single-label)."""
    B, gamma, shift = 6, 0.2, 1.0
    z1, z2 = unit(B, 8, 11), unit(B, 8, 12)
    y = torch.eye(3, dtype=torch.long)[torch.tensor([0, 0, 1, 2, 1, 0])]
    t = y.argmax(1).numpy()
    u, v = np.tanh(z1.numpy()), np.tanh(z2.numpy())
    S = u @ v.T
    ref = 0.0
    for col in (False, True):
        rows = []
        for i in range(B):
            tot = 0.0
            for j in range(B):
                thr = (S[j, j] if col else S[i, i]) - gamma
                c = S[i, j] if S[i, j] >= thr else S[i, j] - shift
                if i == j:
                    tot += math.exp(max(c, 0.0))
                elif t[i] == t[j]:
                    tot += 1.0
                else:
                    tot += math.exp(c)
            rows.append(-S[i, i] + math.log(tot) + gamma)
        ref += np.mean(rows)
    assert float(M.inter_code(z1, z2, y, gamma, shift, False)) == pytest.approx(ref, rel=1e-9)
