"""The potential network, the five arms' losses and densities, envelope gradients, resumable training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from paperflow.docloc import model as M
from paperflow.docloc.jko import Grid, ot_eps, ot_eps_envelope
from paperflow.docloc.train import train_arm

P = {"d_model": 16, "layers": 1, "heads": 2, "channels": 6, "dilations": [1, 2], "stages": 3, "tau": 0.02,
     "eps": 2 / 16**2, "beta": 0.2, "v_range": 10.0, "sinkhorn_iters": 8, "target_sigma": 0.2, "kl_direction": "reverse",
     "jko_a_scale": 1.0, "steps": 4, "batch_size": 4, "lr": 3e-3, "weight_decay": 0.0, "warmup": 0,
     "grad_clip": 1.0, "ckpt_every": 2}
G, L, TD = 16, 5, 12


def feats(n=8, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.standard_normal((n, L, TD)).astype(np.float32)
    tokens[..., -1] = 1.0
    tokens[:, -1, :] = 0.0  # a padding line
    line_id = np.full((n, G, G), -1, np.int16)
    ev = np.zeros((n, G, G), np.uint8)
    for i in range(n):
        for j in range(L - 1):
            line_id[i, 3 * j:3 * j + 2, 2:10] = j
        ev[i, 0:2, 2:10] = 1
    return {"tokens": tokens, "line_id": line_id, "evidence": ev}


@pytest.mark.parametrize("arm", M.ARMS)
def test_every_arm_gives_normalised_densities_and_a_finite_gradient(arm):
    f = feats()
    net = M.build(arm, TD, P)
    tok, lid = torch.from_numpy(f["tokens"]), torch.from_numpy(f["line_id"].astype(np.int64))
    rhos = M.densities(arm, net, tok, lid, P)
    assert len(rhos) == {"single": 1, "poe": 3}.get(arm, P["stages"])
    for r in rhos:
        assert r.dtype == torch.float64 and torch.allclose(r.sum((-2, -1)), torch.ones(8, dtype=torch.float64))
    total, logs = M.loss(arm, net, tok, lid, torch.from_numpy(f["evidence"].astype(np.float32)), P)
    total.backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert torch.isfinite(total) and grads and all(torch.isfinite(g).all() for g in grads)
    if arm == "jko_b":
        assert {"w2_1", "kl_1"} <= logs.keys()


def test_poe_matches_the_parameters_of_the_staged_arm():
    staged, poe = M.n_params(M.build("jko_b", TD, P)), M.n_params(M.build("poe", TD, P))
    assert abs(poe - staged) / staged < 0.1


def test_cells_of_one_line_share_its_encoding_and_empty_cells_differ():
    f = feats(2)
    net = M.build("single", TD, P)
    g = net.enc(torch.from_numpy(f["tokens"]), torch.from_numpy(f["line_id"].astype(np.int64)))
    assert torch.equal(g[0, :, 0, 2], g[0, :, 1, 9]) and not torch.equal(g[0, :, 0, 2], g[0, :, 3, 2])
    assert torch.equal(g[0, :, 15, 15], net.enc.empty.detach())


def test_envelope_gradient_equals_autograd_through_converged_sinkhorn():
    rng = np.random.default_rng(0)
    a0 = torch.tensor(rng.random((1, 8, 8)) + 0.1)
    b = torch.tensor(rng.random((1, 8, 8)) + 0.1)
    b = b / b.sum()
    k = Grid(8, 8).kernels(0.05)
    grads = []
    for fn in (ot_eps, ot_eps_envelope):
        a = (a0 / a0.sum()).clone().requires_grad_(True)
        fn(a, b, 0.05, 300, k).sum().backward()
        g = a.grad - a.grad.mean()  # the potentials' constant shift does not act on densities
        grads.append(g)
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
    assert float(ot_eps(a0 / a0.sum(), b, 0.05, 300, k)) == pytest.approx(
        float(ot_eps_envelope(a0 / a0.sum(), b, 0.05, 300, k)), rel=1e-9)


@pytest.mark.parametrize("arm", ["jko_b", "poe"])
def test_training_resumes_to_identical_weights(tmp_path, arm):
    f = feats(8)
    full, _ = train_arm(arm, P, f, 3, tmp_path / "a")
    _, _ = train_arm(arm, P, f, 3, tmp_path / "b", stop_after=2)  # killed after the step-2 checkpoint
    resumed, _ = train_arm(arm, P, f, 3, tmp_path / "b")
    for (n, x), (_, y) in zip(full.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(x, y), n


def test_bounded_potential_keeps_the_jko_step_finite_for_extreme_potentials():
    from paperflow.docloc.jko import JKOParams, jko_step

    V = torch.zeros(2, 16, 16, dtype=torch.float64)
    V[0, 3:5, 3:9] = -1e4  # an untrained net's potentials can be this extreme
    V[1] += 1e4
    V[1, 8, 8] = 0.0
    rho0 = torch.full((2, 16, 16), 1 / 256, dtype=torch.float64)
    jp = JKOParams(0.02, 2 / 16**2, 0.2, 30)
    rho = jko_step(rho0, M.bounded_potential(V, 10.0), jp)
    assert torch.isfinite(rho).all() and torch.allclose(rho.sum((-2, -1)), torch.ones(2, dtype=torch.float64), atol=1e-6)
    assert rho[0, 3:5, 3:9].sum() > 0.3 and rho[1, 8, 8] > rho[1, 0, 0]
