"""Group-relative policy gradients ("grpo_lite"): the tiny tier's RL objective, shared by the RL studies.

This is GRPO as EasyR1 and TRL implement it, reduced to what a small policy with per-token log-probabilities
needs (no generation engine, no reward server):

- `group_advantages`: A_i = (r_i - mean_g r) / (std_g r + eps) within each prompt's group of G samples.
  A group whose rewards are all equal gets advantage 0 (it carries no learning signal).
- `clipped_surrogate`: the PPO-clip objective min(rho * A, clip(rho, 1 - eps_c, 1 + eps_c) * A) per token,
  rho = exp(logp_new - logp_old), returned as a loss (negated) averaged over valid tokens ("token-mean",
  EasyR1's and TRL's DAPO default).
- `kl_k3`: the low-variance KL estimator to a reference policy, exp(ref - new) - (ref - new) - 1 per token
  (EasyR1's `low_var_kl`; TRL's `beta` term), clamped like EasyR1 to [-10, 10] in the log-ratio.
- `grpo_loss`: surrogate + beta * KL.

With one optimisation step per batch of fresh samples (logp_old = logp_new.detach()), rho = 1 and the
surrogate's gradient is exactly group-normalised REINFORCE; the clip matters when a batch is reused.
The paper-scale path runs TRL's `GRPOTrainer` instead (`paperflow.nn.trl_grpo`).
"""

from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, eps: float = 1e-6, scale: bool = True) -> Tensor:
    """(n_prompts, G) rewards -> (n_prompts, G) group-relative advantages."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (n_prompts, G), got shape {tuple(rewards.shape)}")
    if rewards.shape[1] < 2:
        raise ValueError("a group needs at least 2 samples")
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not scale:
        return centred
    std = rewards.std(dim=1, keepdim=True, unbiased=True)
    return centred / (std + eps)


def _masked_mean(x: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.mean()
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp_min(1.0)


def clipped_surrogate(
    logp_new: Tensor, logp_old: Tensor, advantages: Tensor, mask: Tensor | None = None, clip_eps: float = 0.2
) -> Tensor:
    """PPO-clip loss (to minimise). logp_*: (N, L) per-token log-probs; advantages: (N,) or (N, L)."""
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logp_new)
    ratio = torch.exp(logp_new - logp_old)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    return -_masked_mean(torch.minimum(unclipped, clipped), mask)


def kl_k3(logp_new: Tensor, logp_ref: Tensor, mask: Tensor | None = None) -> Tensor:
    """Low-variance (k3) estimate of KL(pi_new || pi_ref) from per-token log-probs of samples of pi_new."""
    log_ratio = torch.clamp(logp_ref - logp_new, -10.0, 10.0)
    return _masked_mean(torch.exp(log_ratio) - log_ratio - 1.0, mask)


def grpo_loss(
    logp_new: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    mask: Tensor | None = None,
    clip_eps: float = 0.2,
    beta: float = 0.0,
    logp_ref: Tensor | None = None,
) -> Tensor:
    """Clipped surrogate + beta * k3 KL to the reference (needs `logp_ref` when beta > 0)."""
    loss = clipped_surrogate(logp_new, logp_old, advantages, mask, clip_eps)
    if beta > 0.0:
        if logp_ref is None:
            raise ValueError("beta > 0 needs logp_ref")
        loss = loss + beta * kl_k3(logp_new, logp_ref, mask)
    return loss
