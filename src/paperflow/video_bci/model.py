"""The integrator: the shared bidirectional transformer (`paperflow.nn.transformer`) over
[T frame tokens; 1 question token; N hypothesis tokens], with an answer head (5-way, on the question token)
and a trace head (one Bernoulli bit per frame token). A sample is (a*, τ*) drawn from one forward pass.

Token features (40-d, zero where a part does not apply): frame (16) | question: type one-hot (2) + object
one-hot (6) | hypothesis: answer one-hot (5) + trace bits (T = 8) | token type one-hot (3).
The direct arm (b) uses the same model without the hypothesis tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from paperflow.nn.transformer import Transformer, TransformerConfig
from paperflow.video_bci.data import FRAME_DIM, N_OBJ, N_OPT

Q_DIM = 2 + N_OBJ


def feat_dim(T: int) -> int:
    return FRAME_DIM + Q_DIM + N_OPT + T + 3


def tokens(d: Mapping[str, np.ndarray], idx: np.ndarray, with_hyps: bool = True) -> Tensor:
    """Input features [B, T + 1 (+ N), feat_dim] of items `idx` of a split."""
    frames = d["frames"][idx]
    B, T, _ = frames.shape
    D = feat_dim(T)
    o_q, o_h, o_t = FRAME_DIM, FRAME_DIM + Q_DIM, FRAME_DIM + Q_DIM + N_OPT + T
    N = d["prior_ans"].shape[1] if with_hyps else 0
    x = np.zeros((B, T + 1 + N, D), dtype=np.float32)
    x[:, :T, :FRAME_DIM] = frames
    x[:, :T, o_t] = 1.0
    b = np.arange(B)
    x[b, T, o_q + d["qtype"][idx].astype(int)] = 1.0
    qobj = d["qobj"][idx].astype(int)
    x[b[qobj >= 0], T, o_q + 2 + qobj[qobj >= 0]] = 1.0
    x[:, T, o_t + 1] = 1.0
    if with_hyps:
        pa = d["prior_ans"][idx].astype(int)  # [B, N]
        x[b[:, None], T + 1 + np.arange(N)[None, :], o_h + pa] = 1.0
        x[:, T + 1:, o_h + N_OPT:o_h + N_OPT + T] = d["prior_trace"][idx]
        x[:, T + 1:, o_t + 2] = 1.0
    return torch.from_numpy(x)


class Integrator(nn.Module):
    def __init__(self, T: int, cfg: Mapping[str, Any]):
        super().__init__()
        self.T = T
        self.body = Transformer(TransformerConfig(d_model=int(cfg["d_model"]), n_heads=int(cfg["heads"]),
                                                  n_layers=int(cfg["layers"]), input_dim=feat_dim(T), causal=False))
        self.answer_head = nn.Linear(int(cfg["d_model"]), N_OPT)
        self.trace_head = nn.Linear(int(cfg["d_model"]), 1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x [B, L, feat] → answer logits [B, 5], trace logits [B, T]."""
        h = self.body(x).last_hidden
        return self.answer_head(h[:, self.T]), self.trace_head(h[:, :self.T])[..., 0]


def sample(ans_logits: Tensor, trace_logits: Tensor, G: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """G samples per item: answers [B, G] (long), traces [B, G, T] (float 0/1)."""
    probs = ans_logits.softmax(-1)
    ans = torch.multinomial(probs, G, replacement=True, generator=gen)
    p_tr = torch.sigmoid(trace_logits)[:, None, :].expand(-1, G, -1)
    trace = (torch.rand(p_tr.shape, generator=gen) < p_tr).float()
    return ans, trace


def token_logps(ans_logits: Tensor, trace_logits: Tensor, ans: Tensor, trace: Tensor) -> Tensor:
    """Per-'token' log-probs [B·G, 1 + T]: the answer, then each trace bit (grpo_lite's token-mean)."""
    B, G = ans.shape
    la = ans_logits.log_softmax(-1)[:, None, :].expand(-1, G, -1).gather(-1, ans[..., None])  # [B, G, 1]
    tl = trace_logits[:, None, :].expand(-1, G, -1)
    lt = -nn.functional.binary_cross_entropy_with_logits(tl, trace, reduction="none")  # [B, G, T]
    return torch.cat([la, lt], dim=-1).reshape(B * G, -1)


@torch.no_grad()
def predict(net: Integrator, d: Mapping[str, np.ndarray], with_hyps: bool, batch: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """Greedy answers [n] and traces [n, T] (bits with p > 0.5) on a whole split."""
    net.eval()
    ans, tr = [], []
    n = len(d["y"])
    for i in range(0, n, batch):
        a, t = net(tokens(d, np.arange(i, min(n, i + batch)), with_hyps))
        ans.append(a.argmax(-1).numpy())
        tr.append((t > 0).numpy().astype(np.uint8))
    net.train()
    return np.concatenate(ans), np.concatenate(tr)
