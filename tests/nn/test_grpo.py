"""grpo_lite objective (paperflow.nn.grpo) and the TRL paper-scale path (paperflow.nn.trl_grpo)."""

from __future__ import annotations

import pytest
import torch

from paperflow.nn import grpo


def test_group_advantages_normalise_within_groups() -> None:
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 3.0]])
    a = grpo.group_advantages(r)
    assert torch.allclose(a.mean(dim=1), torch.zeros(3), atol=1e-6)
    assert torch.allclose(a[1], torch.zeros(4))  # an all-equal group carries no signal
    assert torch.allclose(a[0].std(unbiased=True), torch.tensor(1.0), atol=1e-4)
    assert a[2, 3] > 0 > a[2, 0]
    with pytest.raises(ValueError):
        grpo.group_advantages(torch.zeros(4))


def test_surrogate_gradient_is_reinforce_on_fresh_samples() -> None:
    logits = torch.randn(6, 5, requires_grad=True)
    actions = torch.tensor([0, 1, 2, 3, 4, 0])
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0])
    logp = torch.log_softmax(logits, -1).gather(1, actions[:, None])  # (6, 1)
    loss = grpo.clipped_surrogate(logp, logp.detach(), adv)
    (g,) = torch.autograd.grad(loss, logits)
    logits2 = logits.detach().clone().requires_grad_(True)
    lp2 = torch.log_softmax(logits2, -1).gather(1, actions[:, None])[:, 0]
    (g2,) = torch.autograd.grad(-(lp2 * adv).mean(), logits2)
    assert torch.allclose(g, g2, atol=1e-6)


def test_clip_stops_gradient_beyond_trust_region() -> None:
    lp_new = torch.tensor([[0.0]], requires_grad=True)
    lp_old = torch.tensor([[-1.0]])  # ratio e > 1.2
    loss = grpo.clipped_surrogate(lp_new, lp_old, torch.tensor([1.0]), clip_eps=0.2)
    (g,) = torch.autograd.grad(loss, lp_new)
    assert float(g) == 0.0
    loss_neg = grpo.clipped_surrogate(lp_new, lp_old, torch.tensor([-1.0]), clip_eps=0.2)
    (g_neg,) = torch.autograd.grad(loss_neg, lp_new)
    assert float(g_neg) != 0.0  # negative advantage with ratio > 1 + eps stays unclipped (pessimistic bound)


def test_mask_excludes_padding_and_kl_is_zero_at_reference() -> None:
    lp = torch.tensor([[-1.0, -2.0, -50.0]])
    mask = torch.tensor([[1, 1, 0]])
    a = grpo.clipped_surrogate(lp, lp, torch.tensor([1.0]), mask)
    assert float(a) == pytest.approx(-1.0)
    assert float(grpo.kl_k3(lp, lp, mask)) == pytest.approx(0.0)
    assert float(grpo.kl_k3(lp, lp - 0.5, mask)) > 0.0
    with pytest.raises(ValueError):
        grpo.grpo_loss(lp, lp, torch.tensor([1.0]), mask, beta=0.1)


def test_grpo_lite_learns_a_bandit() -> None:
    torch.manual_seed(0)
    logits = torch.zeros(4, requires_grad=True)
    opt = torch.optim.SGD([logits], lr=0.5)
    for _ in range(60):
        dist = torch.distributions.Categorical(logits=logits.expand(8, 8, 4))
        acts = dist.sample()
        rewards = (acts == 2).float()
        adv = grpo.group_advantages(rewards).reshape(-1)
        lp = dist.log_prob(acts).reshape(-1, 1)
        loss = grpo.grpo_loss(lp, lp.detach(), adv)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert int(torch.argmax(logits)) == 2
    assert float(torch.softmax(logits, -1)[2]) > 0.8


def test_trl_grpo_runs_on_a_tiny_llama(tmp_path) -> None:
    from paperflow.nn import trl_grpo

    vocab = [str(d) for d in range(10)] + ["+", "="]
    tok = trl_grpo.word_tokenizer(vocab)
    assert tok.decode(tok("1 + 2 =")["input_ids"]) == "1 + 2 ="
    model = trl_grpo.tiny_llama(len(tok), seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = {"prompt": ["1 + 2 =", "3 + 4 =", "2 + 2 =", "5 + 1 ="], "answer": ["3", "7", "4", "6"]}
    seen: list[int] = []

    def reward(completions: list[str], answer: list[str], **_: object) -> list[float]:
        seen.append(len(completions))
        return [float(c.strip().split(" ")[:1] == [a]) + 0.1 * len(c.split()) for c, a in zip(completions, answer)]

    settings = trl_grpo.GRPOSettings(num_generations=4, prompts_per_step=2, max_completion_length=4, max_steps=2, learning_rate=1e-2)
    log = trl_grpo.train(model, tok, rows, [reward], settings, tmp_path / "out")
    assert len(log) == 2 and all("reward" in h for h in log)
    assert seen and all(n == 8 for n in seen)  # G completions for each of the step's prompts
    changed = any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert changed
    # the Trainer's process-global accelerate state is reset: a later stage in this process can
    # build its own Accelerator with other settings (CI once failed on exactly this)
    from accelerate import Accelerator

    assert Accelerator(cpu=True, mixed_precision="no").mixed_precision == "no"
    trl_grpo.reset_accelerate_state()


def test_trl_grpo_resumes_a_killed_run_to_the_weights_of_an_uninterrupted_one(tmp_path) -> None:
    from paperflow.nn import trl_grpo

    tok = trl_grpo.word_tokenizer([str(d) for d in range(10)] + ["+", "="])
    rows = {"prompt": ["1 + 2 =", "3 + 4 =", "2 + 2 =", "5 + 1 ="] * 2, "answer": ["3", "7", "4", "6"] * 2}

    def reward(completions: list[str], answer: list[str], **_: object) -> list[float]:
        return [float(c.strip().split(" ")[:1] == [a]) + 0.1 * len(c.split()) for c, a in zip(completions, answer)]

    s = trl_grpo.GRPOSettings(num_generations=4, prompts_per_step=2, max_completion_length=4, max_steps=4,
                              learning_rate=1e-2, save_steps=2)
    full = trl_grpo.tiny_llama(len(tok), seed=0)
    log_full = trl_grpo.train(full, tok, rows, [reward], s, tmp_path / "full")
    killed = trl_grpo.tiny_llama(len(tok), seed=0)
    assert trl_grpo.train(killed, tok, rows, [reward], s, tmp_path / "run", stop_after=3) is None  # checkpoint at 2
    fresh = trl_grpo.tiny_llama(len(tok), seed=1)  # a new process: other initial weights, overwritten on resume
    log_resumed = trl_grpo.train(fresh, tok, rows, [reward], s, tmp_path / "run")
    assert log_resumed is not None and [h["step"] for h in log_resumed] == [1, 2, 3, 4]
    for (name, a), (_, b) in zip(full.named_parameters(), fresh.named_parameters()):
        assert torch.equal(a, b), name
    assert [h["reward"] for h in log_resumed] == [h["reward"] for h in log_full]
