"""Base-model pre-training (resumable), the teacher's outputs, student training per arm, and evaluation."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state
from paperflow.core.schedule import lambda_lr
from paperflow.core.seeding import seed_everything, stream
from paperflow.hyper_icl.data import N_LABELS, coarse_of
from paperflow.hyper_icl.model import (QUERY_LEN, REFERENCE_KIND, Student, build_base, check_param_band, fixed_map,
                                       icl_inputs, layer_distance, query_inputs, qry_positions, sequences,
                                       standardizer, trainable_counts)
from paperflow.nn.transformer import Transformer

log = logging.getLogger(__name__)

# arm name → (student kind, loss: distillation geometry or None, λ_ce override, α override)
ARMS: dict[str, tuple[str, str | None, float | None, float | None]] = {
    "zero_shot": ("none", None, None, None),  # (a) evaluation only
    "teacher": ("none", None, None, None),  # (b) the base model with demos, evaluation only
    "shift": ("shift", None, None, None),  # (c) LIVE-like shift vectors
    "vkv": ("vkv", None, None, None),  # (d) HiFICL-like virtual KV
    "logit_fixed": ("logit_fixed", None, None, None),  # (e)
    "logit_gated": ("logit_adaptive", None, None, None),  # (f)
    "gated_euclid": ("logit_adaptive", "euclidean", None, None),  # (g)
    "gated_lorentz": ("logit_adaptive", "lorentz", None, None),  # (h) Hyper-ICL
    "lora": ("lora", None, None, None),  # (i)
    "gated_lorentz_noce": ("logit_adaptive", "lorentz", 0.0, None),  # control: (h) with λ_ce = 0
    "gated_noteacher": ("logit_adaptive", None, None, 0.0),  # control: (f) with α = 0
}
EVAL_ONLY = ("zero_shot", "teacher")


def to_t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def param_band(base: Transformer, p: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Trainable parameters of every configured trainable arm, counted on the built modules, and their ratio to
    (f); raises ValueError (check_param_band) when one lies outside [1/max_param_ratio, max_param_ratio] × (f).
    (f) is always built as the reference, even when this job does not train it."""
    arms = [a for a in p["arms"] if a not in EVAL_ONLY]
    counts = trainable_counts(base, p, [REFERENCE_KIND] + [ARMS[a][0] for a in arms])
    ratios = check_param_band(counts, float(p["max_param_ratio"]))
    return {a: {"n_params": counts[ARMS[a][0]], "ratio": round(ratios[ARMS[a][0]], 4)} for a in arms}


# ------------------------------------------------------------------------------------------- base model
def pretrain_loss(net: Transformer, vis: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    logits = net(sequences(vis, label)).logits
    pos = qry_positions(vis.shape[1])
    return F.cross_entropy(logits[:, pos].reshape(-1, N_LABELS), label.reshape(-1))


def train_base(p: Mapping[str, Any], ep: Mapping[str, np.ndarray], seed: int, ckpt_dir: Path,
               stop_after: int | None = None) -> tuple[Transformer | None, list[dict[str, float]]]:
    """Pre-train the base model on the pre-training episodes (resumable from `ckpt_dir`)."""
    seed_everything(seed)
    net = build_base(ep["vis"].shape[-1], p)
    vis, label = to_t(ep["vis"]), to_t(ep["label"])
    n, bs, total = vis.shape[0], int(p["batch_size"]), int(p["steps"])
    opt = torch.optim.AdamW(net.parameters(), lr=float(p["lr"]), weight_decay=float(p["weight_decay"]))
    sched = lambda_lr(opt, total, float(p["warmup"]))
    start = 0
    if has_checkpoint(ckpt_dir):
        start = load_training_state(ckpt_dir, model=net, optimizer=opt, scheduler=sched)["step"]
        log.info("resumed base s%d at step %d", seed, start)
    per_epoch = max(1, n // bs)
    order = np.empty(0, np.int64)
    hist: list[dict[str, float]] = []
    for step in range(start, total):
        epoch, j = divmod(step, per_epoch)
        if j == 0 or order.size == 0:  # the batch order depends on (seed, epoch) only: resumable
            order = stream(seed, "base_epoch", epoch).permutation(n)
        idx = to_t(order[j * bs:(j + 1) * bs])
        loss = pretrain_loss(net, vis[idx], label[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == total - 1:
            hist.append({"step": step, "loss": float(loss.detach())})
            log.info("base s%d step %d loss %.4f", seed, step, float(loss.detach()))
        if int(p["ckpt_every"]) and (step + 1) % int(p["ckpt_every"]) == 0 and step + 1 < total:
            save_training_state(ckpt_dir, model=net, optimizer=opt, step=step + 1, scheduler=sched)
        if stop_after is not None and step + 1 >= stop_after:
            return None, hist
    return net, hist


@torch.no_grad()
def icl_curve(net: Transformer, ep: Mapping[str, np.ndarray], tasks: list[str]) -> dict[str, list[float]]:
    """Accuracy at k = 0..n_demos demos on held-out pre-training episodes, overall and per task."""
    net.eval()
    vis, label = to_t(ep["vis"]), to_t(ep["label"])
    pred = net(sequences(vis, label)).logits[:, qry_positions(vis.shape[1])].argmax(-1)
    ok = (pred == label).float().numpy()
    out = {"all": ok.mean(0).tolist()}
    for t, name in enumerate(tasks):
        sel = ep["task"] == t
        if sel.any():
            out[name] = ok[sel].mean(0).tolist()
    return out


# ------------------------------------------------------------------------------------------------ teacher
@torch.no_grad()
def teacher_outputs(net: Transformer, ep: Mapping[str, np.ndarray], layers: list[int],
                    batch: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """The teacher (base model with the episode's demos) on target training episodes: answer logits [E, 9]
    and hidden states at the query positions [E, |layers|, QUERY_LEN, D]."""
    net.eval()
    vis, label = to_t(ep["vis"]), to_t(ep["label"])
    logits, hidden = [], []
    for i in range(0, vis.shape[0], batch):
        out = net(sequences(vis[i:i + batch], label[i:i + batch]), output_hidden_states=True)
        logits.append(out.logits[:, -1])
        hidden.append(torch.stack([out.hidden_states[li][:, -QUERY_LEN:] for li in layers], 1))
    return torch.cat(logits).numpy(), torch.cat(hidden).numpy()


@torch.no_grad()
def teacher_eval(net: Transformer, q: Mapping[str, np.ndarray]) -> np.ndarray:
    """Predictions [D, Q] of the teacher for every demo draw (D draws and orderings per query)."""
    net.eval()
    vis, dv, dl = to_t(q["vis"]), to_t(q["demo_vis"]), to_t(q["demo_label"])
    preds = [net(icl_inputs(dv[:, d], dl[:, d], vis)).logits[:, -1].argmax(-1) for d in range(dv.shape[1])]
    return torch.stack(preds).numpy()


# ------------------------------------------------------------------------------------------------ students
class LossSpec:
    """One arm's objective `λ_ce·CE + α·T²·KL(p_T ‖ p_S) + β·Σ_ℓ w_ℓ·mean_i dist(map(h_S), map(h_T))`, the
    fixed map's statistics taken from the teacher's states (shared by the tiny and the hf_lm backends)."""

    def __init__(self, arm: str, p: Mapping[str, Any], t_hidden: np.ndarray, layers: list[int]):
        _, geometry, ce_w, kd_w = ARMS[arm]
        self.geometry = geometry
        self.lam = float(p["lambda_ce"]) if ce_w is None else ce_w
        self.alpha = float(p["alpha"]) if kd_w is None else kd_w
        self.beta = float(p["beta"]) if geometry else 0.0
        self.layers = list(layers)
        self.w_l = torch.tensor(p["layer_weights"] if p["layer_weights"] else [1.0 / len(layers)] * len(layers),
                                dtype=torch.float64)
        self.mean, self.std = (torch.from_numpy(a) for a in standardizer(t_hidden))
        self.T = float(p["kd_temperature"])
        self.c, self.s, self.eps = float(p["curvature"]), float(p["map_scale"]), float(p["arcosh_eps"])
        self.r_max = float(p["r_max_times_inv_sqrt_c"]) / self.c**0.5

    def __call__(self, logits: torch.Tensor, y: torch.Tensor, t_logits: torch.Tensor, hidden: list[torch.Tensor],
                 t_hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """logits [B, 9] and the student's query-position states per distilled layer ([B, P, D] each, only read
        when β > 0) against the teacher's (t_logits [B, 9], t_hidden [B, |layers|, P, D]). → (loss, distance)."""
        loss = self.lam * F.cross_entropy(logits, y) if self.lam else logits.new_zeros(())
        if self.alpha:
            T = self.T
            kl = F.kl_div(F.log_softmax(logits / T, -1), F.log_softmax(t_logits / T, -1), log_target=True,
                          reduction="batchmean")
            loss = loss + self.alpha * T * T * kl
        dist = torch.zeros((), dtype=torch.float64, device=logits.device)
        if self.beta:
            for li in range(len(self.layers)):
                mean, std = self.mean[li].to(logits.device), self.std[li].to(logits.device)
                vs = fixed_map(hidden[li], mean, std, self.s, self.r_max)
                vt = fixed_map(t_hidden[:, li], mean, std, self.s, self.r_max)
                dist = dist + self.w_l[li] * layer_distance(vs, vt, self.geometry, self.c,  # type: ignore[arg-type]
                                                            self.eps).mean()
            loss = loss + self.beta * dist.float()
        return loss, dist


def train_student(arm: str, base: Transformer, p: Mapping[str, Any], ep: Mapping[str, np.ndarray],
                  t_logits: np.ndarray, t_hidden: np.ndarray, seed: int) -> tuple[Student, list[dict[str, float]]]:
    """Train one arm's modules on the target task's episodes (the query is the last item of each)."""
    kind = ARMS[arm][0]
    seed_everything(seed)
    student = Student(base, kind, p)
    spec = LossSpec(arm, p, t_hidden, list(p["distill_layers"]))
    q_vis, y = to_t(ep["vis"][:, -1]), to_t(ep["label"][:, -1])
    tl, th = to_t(t_logits), to_t(t_hidden)
    opt = torch.optim.Adam(student.trainable(), lr=float(p["adapter_lr"]))
    n, bs = q_vis.shape[0], int(p["adapter_batch"])
    per_epoch = max(1, n // bs)
    hist: list[dict[str, float]] = []
    student.train()
    order = np.empty(0, np.int64)
    for step in range(int(p["adapter_steps"])):
        epoch, j = divmod(step, per_epoch)
        if j == 0 or order.size == 0:
            order = stream(seed, arm, "epoch", epoch).permutation(n)
        idx = to_t(order[j * bs:(j + 1) * bs])
        out = student(query_inputs(q_vis[idx]), output_hidden_states=spec.beta > 0)
        hidden = [out.hidden_states[layer][:, -QUERY_LEN:] for layer in spec.layers] if spec.beta else []
        loss, dist = spec(out.logits[:, -1], y[idx], tl[idx], hidden, th[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == int(p["adapter_steps"]) - 1:
            hist.append({"step": step, "loss": float(loss.detach()), "dist": float(dist.detach())})
    student.eval()
    return student, hist


@torch.no_grad()
def student_predict(student: torch.nn.Module, q_vis: np.ndarray, batch: int = 2000) -> np.ndarray:
    x = to_t(q_vis)
    return torch.cat([student(query_inputs(x[i:i + batch])).logits[:, -1].argmax(-1)
                      for i in range(0, x.shape[0], batch)]).numpy()


# ----------------------------------------------------------------------------------------------- metrics
def hierarchy_metrics(pred: np.ndarray, q: Mapping[str, np.ndarray], target: str,
                      warm: list[int]) -> dict[str, float]:
    """Fine-label accuracy and the within-correct-coarse share of errors, on the queries whose answer is a
    fine shape (T2, warm colours). NaN for T1 (its answers have no hierarchy)."""
    if target != "T2":
        return {"fine_acc": float("nan"), "within_coarse_error_share": float("nan"), "n_fine": 0}
    sel = np.isin(q["colour"], warm)
    y, yh = q["label"][sel], pred[sel]
    wrong = yh != y
    share = float((coarse_of(yh[wrong]) == coarse_of(y[wrong])).mean()) if wrong.any() else float("nan")
    return {"fine_acc": float((~wrong).mean()), "within_coarse_error_share": share, "n_fine": int(sel.sum())}


def arm_result(arm: str, pred: np.ndarray, q: Mapping[str, np.ndarray], target: str, warm: list[int],
               n_params: int, tokens: int, seconds: float) -> dict[str, Any]:
    """Per-arm metrics; `pred` is [Q] (students) or [D, Q] (teacher: one row per demo draw)."""
    draws = np.atleast_2d(pred)
    correct_dq = draws == q["label"][None]
    per_draw = correct_dq.mean(1)
    hier = [hierarchy_metrics(d, q, target, warm) for d in draws]
    mean_h = {k: float(np.nanmean([h[k] for h in hier])) if target == "T2" else float("nan")
              for k in ("fine_acc", "within_coarse_error_share")}
    return {"arm": arm, "acc": float(correct_dq.mean()), "correct": correct_dq.mean(0).tolist(),
            "demo_std": float(per_draw.std(ddof=1)) if draws.shape[0] > 1 else 0.0,
            "demo_std_by_construction": draws.shape[0] == 1, "n_draws": int(draws.shape[0]),
            "per_draw_acc": per_draw.tolist(), **mean_h, "n_fine": hier[0]["n_fine"],
            "n_params": int(n_params), "tokens_per_query": int(tokens), "train_seconds": round(seconds, 3)}


def run_arms(arms: list[str], base: Transformer, p: Mapping[str, Any], data: Mapping[str, Any], target: str,
             warm: list[int], seed: int) -> dict[str, Any]:
    """Train (where needed) and evaluate `arms` on one target task with one base model."""
    ep, test, val = data["train"], data["test"], data["val"]
    k = ep["vis"].shape[1] - 1
    need_teacher = any(a not in EVAL_ONLY for a in arms)
    t_logits = t_hidden = None
    if need_teacher:
        t_logits, t_hidden = teacher_outputs(base, ep, list(p["distill_layers"]))
    res: dict[str, Any] = {}
    for arm in arms:
        t0 = time.perf_counter()
        if arm == "zero_shot":
            pred, val_pred, n_params, tokens, hist = (student_predict(base, test["vis"]),
                                                      student_predict(base, val["vis"]), 0, 1 + QUERY_LEN, [])
        elif arm == "teacher":
            pred, val_pred, n_params, tokens, hist = (teacher_eval(base, test), teacher_eval(base, val), 0,
                                                      1 + 3 * k + QUERY_LEN, [])
        else:
            student, hist = train_student(arm, base, p, ep, t_logits, t_hidden, seed)  # type: ignore[arg-type]
            pred, val_pred = student_predict(student, test["vis"]), student_predict(student, val["vis"])
            n_params, tokens = student.n_trainable(), 1 + QUERY_LEN
        r = arm_result(arm, pred, test, target, warm, n_params, tokens, time.perf_counter() - t0)
        r["val_acc"] = float((np.atleast_2d(val_pred) == val["label"][None]).mean())
        r["history"] = hist
        res[arm] = r
        log.info("%s %s s%d: acc %.3f (%d params, %.1f s)", target, arm, seed, r["acc"], n_params, r["train_seconds"])
    return res
