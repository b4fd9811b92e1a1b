import torch

from paperflow.quantization.kotms import learn_kotms, random_kron, trimodal_loss, trimodal_loss_reference
from paperflow.quantization.ops import cayley, kron_factors, rotate_in, rotate_weight
from paperflow.quantization.qmodel import qlinears


def test_kron_factor_examples_from_spec():
    assert kron_factors(4096, 4096) == (8, 512)  # LLaMA-2-7B q_proj
    assert kron_factors(4096, 11008) == (16, 688)  # down_proj
    assert kron_factors(256, 256) == (8, 32)
    assert kron_factors(256, 512) == (16, 32)


def test_cayley_orthogonal():
    S = torch.randn(12, 12, generator=torch.Generator().manual_seed(0))
    C = cayley(S)
    assert (C.T @ C - torch.eye(12)).abs().max() < 1e-5


def test_rotation_preserves_linear_output():
    g = torch.Generator().manual_seed(1)
    W, x = torch.randn(40, 48, generator=g), torch.randn(7, 48, generator=g)
    C, B = random_kron(W, g)
    assert torch.allclose(rotate_in(x, C, B) @ rotate_weight(W, C, B).T, x @ W.T, atol=1e-4)


def test_fast_loss_equals_spec_loss():
    W = torch.randn(30, 64, generator=torch.Generator().manual_seed(2)) * 0.02
    assert torch.allclose(trimodal_loss(W), trimodal_loss_reference(W), atol=1e-5)


def test_kotms_orthogonal_and_loss_decreases():
    W = torch.randn(64, 96, generator=torch.Generator().manual_seed(3)) * 0.02
    C, B, log = learn_kotms(W, iters=30, lr=1e-2)
    for M in (C, B):
        assert (M.T @ M - torch.eye(M.shape[0])).abs().max() < 1e-5
    assert log["loss_last"] <= log["loss_first"]
    assert log["learned_kept"] and log["loss_learned"] < log["loss_first"]  # it actually learned something


def test_rotated_fp_model_logits_unchanged(tiny_llama):
    ids = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = tiny_llama(ids).logits
    for lin in qlinears(tiny_llama).values():
        C, B, _ = learn_kotms(lin.weight, iters=10)
        assert not torch.allclose(C, torch.eye(C.shape[0]))
        lin.set_rotation(C, B)
    with torch.no_grad():
        out = tiny_llama(ids).logits
    assert (out - ref).abs().max() < 1e-4


def test_loss_gradient_equals_autograd_through_spec_loss():
    g = torch.Generator().manual_seed(5)
    W0 = (torch.randn(24, 40, generator=g) * 0.02 + torch.randn(24, 1, generator=g) * 0.01).double()
    grads = []
    for f in (trimodal_loss, trimodal_loss_reference):
        W = W0.clone().requires_grad_()
        f(W).backward()
        grads.append(W.grad)
    assert torch.allclose(grads[0], grads[1], rtol=1e-9, atol=1e-12)
    assert grads[0].abs().max() > 1e-3  # a real gradient, not zeros on both sides


def test_loss_of_a_stack_is_the_loss_of_each_weight():
    Ws = torch.randn(3, 16, 32, generator=torch.Generator().manual_seed(6)) * 0.02
    assert torch.allclose(trimodal_loss(Ws), torch.stack([trimodal_loss(W) for W in Ws]), atol=1e-6)


def test_rotate_weight_is_the_kronecker_rotation():
    g = torch.Generator().manual_seed(7)
    W = torch.randn(10, 48, generator=g, dtype=torch.float64)
    C, B = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))[0], \
        torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))[0]
    Q = torch.kron(C.contiguous(), B.T.contiguous())  # x' = Q x for row-major l×r reshapes, so W' = W Qᵀ
    assert torch.allclose(rotate_weight(W, C, B), W @ Q.T, atol=1e-12)
    assert torch.allclose(rotate_weight(W, C, B), rotate_in(W, C, B), atol=1e-12)
