"""LLaDA low-confidence remasking decoding with the MPS hook and the study's diagnostics.

The answer window (MASK × L after `[visual; SEP]`) is split into blocks (semi-autoregressive; one block by
default). Each step runs one forward pass, optionally edits the final states of masked slots (MPS), reads
logits, and commits the `n_s` masked slots of the current block with the highest max-softmax; `n_s`
spreads the block's slots evenly over its steps (LLaDA's `get_num_transfer_tokens`, remainder first).
Greedy (temperature 0), as in the official LaViDa fork.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from paperflow.mpdpac.fixes import Prior, mps_apply, prior_cos
from paperflow.mpdpac.model import Backbone, build_inputs


def transfer_schedule(n_masked: int, steps: int) -> list[int]:
    base, rem = divmod(n_masked, steps)
    return [base + (1 if i < rem else 0) for i in range(steps)]


@dataclass
class DecodeOut:
    answer: np.ndarray  # [B, L] committed ids
    cos: np.ndarray  # [B, steps, L] unclipped cos to the paper prior at masked slots (NaN elsewhere)
    factor_nonzero: np.ndarray  # [B, steps, L] 1 where MPS's factor a > 0 at a masked slot, 0 masked & a = 0, NaN unmasked
    vis_attn: np.ndarray | None  # [B, n_layers, steps] attention mass from masked answer queries onto visual keys
    obj_attn: np.ndarray | None  # [B, n_layers, steps] ... onto object (non-BG visual) keys
    dist_attn: np.ndarray | None = None  # [B, n_layers, steps, n_bins] ... onto keys at query−key distance bin
    dist_mask_attn: np.ndarray | None = None  # [B, n_layers, steps, n_bins] ... onto still-masked keys, by bin


def distance_edges(T: int) -> list[int]:
    """Left edges of the |query − key| bins: 0 (itself), 1, 2–3, 4–7, … (powers of two) up to T − 1."""
    edges, e = [0, 1], 2
    while e < T:
        edges.append(e)
        e *= 2
    return edges


def distance_bins(T: int, start: int) -> Tensor:
    """One-hot [T − start, T, n_bins]: the bin of |q − k| for every answer query q ≥ start and key k."""
    q = torch.arange(start, T)[:, None]
    k = torch.arange(T)[None, :]
    d = (q - k).abs()
    edges = torch.tensor(distance_edges(T))
    idx = torch.bucketize(d, edges, right=True) - 1
    return torch.nn.functional.one_hot(idx, len(edges)).float()


@torch.no_grad()
def decode(model: Backbone, visual: Tensor, *, answer_len: int, tokens_per_step: int, block_len: int,
           special: dict[str, int], diag_prior: Prior, mps_prior: Prior | None = None, lam: float = 0.0,
           visual_len: int | None = None, attention: bool = False) -> DecodeOut:
    mask_id, bg = special["mask"], special["bg"]
    ids, start = build_inputs(visual, answer_len, special["sep"], mask_id, bg, visual_len)
    B, T = ids.shape
    L = answer_len
    blk = block_len if block_len and block_len > 0 else L
    if L % blk:
        raise ValueError(f"answer_len {L} must be a multiple of block_len {blk}")
    steps_per_block = math.ceil(blk / tokens_per_step)
    n_steps = (L // blk) * steps_per_block
    cos = np.full((B, n_steps, L), np.nan, np.float32)
    fac = np.full((B, n_steps, L), np.nan, np.float32)
    n_layers = model.n_layers
    vis = np.zeros((B, n_layers, n_steps), np.float32) if attention else None
    obj = np.zeros((B, n_layers, n_steps), np.float32) if attention else None
    onehot = distance_bins(T, start).to(ids.device) if attention else None
    nb = int(onehot.shape[-1]) if onehot is not None else 0
    dist = np.zeros((B, n_layers, n_steps, nb), np.float32) if attention else None
    dist_m = np.zeros((B, n_layers, n_steps, nb), np.float32) if attention else None
    is_obj_key = (ids[:, :start - 1] != bg)  # [B, start-1]
    step = 0
    for b in range(L // blk):
        lo, hi = start + b * blk, start + (b + 1) * blk
        sched = transfer_schedule(blk, steps_per_block)
        for s in range(steps_per_block):
            masked = ids == mask_id  # [B, T]
            st = model.states(ids, output_attentions=attention)
            h = st.layer_states[-1]
            ans_masked = masked[:, start:]
            c = prior_cos(h[:, start:], diag_prior)
            cos[:, step] = torch.where(ans_masked, c, torch.nan).cpu().numpy()
            if mps_prior is not None and lam > 0:
                h, a = mps_apply(h, masked, mps_prior, lam)
                fac[:, step] = torch.where(ans_masked, (a[:, start:] > 0).float(), torch.nan).cpu().numpy()
            else:
                fac[:, step] = torch.where(ans_masked, 0.0, torch.nan).cpu().numpy()
            if attention:
                qmask = ans_masked.float()  # [B, L]
                nq = qmask.sum(dim=1).clamp(min=1)
                for li, w in enumerate(st.attentions):  # type: ignore[union-attr]
                    wa = w[:, :, start:, :].mean(dim=1)  # [B, L, T] head-averaged, answer queries
                    mv = wa[:, :, : start - 1].sum(dim=-1)  # onto the visual prefix
                    mo = (wa[:, :, : start - 1] * is_obj_key[:, None, :]).sum(dim=-1)
                    vis[:, li, step] = ((mv * qmask).sum(dim=1) / nq).cpu().numpy()  # type: ignore[index]
                    obj[:, li, step] = ((mo * qmask).sum(dim=1) / nq).cpu().numpy()  # type: ignore[index]
                    per_q = torch.einsum("blt,ltn->bln", wa.float(), onehot)  # [B, L, bins]
                    per_qm = torch.einsum("blt,bt,ltn->bln", wa.float(), masked.float(), onehot)
                    dist[:, li, step] = ((per_q * qmask[..., None]).sum(dim=1) / nq[:, None]).cpu().numpy()  # type: ignore[index]
                    dist_m[:, li, step] = ((per_qm * qmask[..., None]).sum(dim=1) / nq[:, None]).cpu().numpy()  # type: ignore[index]
            logits = model.logits(h).double()
            p = logits.softmax(dim=-1)
            conf, x0 = p.max(dim=-1)
            conf = torch.where(masked, conf, -torch.inf)
            conf[:, :lo] = -torch.inf
            conf[:, hi:] = -torch.inf
            k = sched[s]
            if k > 0:
                n_left = (ids[:, lo:hi] == mask_id).sum(dim=1)
                top = conf.topk(k, dim=1).indices  # [B, k]
                commit = torch.zeros_like(masked)
                commit.scatter_(1, top, True)
                # never commit an unmasked slot (rows with fewer masked slots than k)
                commit &= masked
                if bool((n_left < k).any()):
                    commit &= conf > -torch.inf
                ids = torch.where(commit, x0, ids)
            step += 1
    return DecodeOut(ids[:, start:].cpu().numpy(), cos, fac, vis, obj, dist, dist_m)
