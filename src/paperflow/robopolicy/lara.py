"""LARA, tiny profile (spec d.2): a tiny VLA (slot-0 image + bag-of-words instruction + state ->
H-step action chunk through a 4-block DiT with a flow-matching or MSE head), a tiny Moto-style latent
action model (frozen conv stem, M-Former over [queries; cond; SEP; target], continuous `embed`, VQ with
the legacy beta-on-codebook convention, conv decoder on current-frame pixels), and the alignment loss
`L = L_flow + w_align * mean(1 - cos(W h, e)) + w_lam * L_LAM` with h = DiT hidden state list index -3
(output of block 2 of 4) at the last token and e = LAM embed(o_t, o_t+K), K = H - 1.

Variants: `dit_only` (no LAM), `frozen_align` (e detached, LAM frozen), `lara` (joint, e not detached),
`lara_mse` (joint, MSE head). Data: the robotics extractor's Arrow episodes (`bridge.load_split`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from paperflow.core.schedule import warmup_cosine
from paperflow.robotics.api import COLORS, SHAPES, FrozenStem, LAMConfig, load_split, normalize_actions, resize

VARIANTS = ("dit_only", "frozen_align", "lara", "lara_mse")
# closed vocabulary of the simulator's instruction templates (spec b.4)
VOCAB = ["put", "the", "on", "plate", "push", "to", "left", "right", "lift"] + list(COLORS) + list(SHAPES)


def bag_of_words(instruction: str) -> np.ndarray:
    v = np.zeros(len(VOCAB), np.float32)
    for w in instruction.lower().split():
        if w in VOCAB:
            v[VOCAB.index(w)] += 1.0
    return v


# ------------------------------------------------------------------------------------------ data
@dataclass
class Demos:
    images: np.ndarray  # (F, S, S, 3) uint8, slot 0, all frames of all episodes
    states: np.ndarray  # (F, 7) float32, z-scored with train stats
    offsets: np.ndarray  # (E,)
    lengths: np.ndarray  # (E,) frames
    actions: list[np.ndarray]  # per episode (N-1, 7), normalised (bounds_q99, gripper 0/1)
    bow: np.ndarray  # (E, V)
    tasks: list[str]  # task folder (template) per episode
    instructions: list[str]


def load_demos(mv_dir: str | Path, split: str, stats: dict[str, Any], templates: list[str] | None = None,
               max_per_template: int | None = None) -> Demos:
    from paperflow.robotics.api import TEMPLATE_FOLDERS

    ds = load_split(mv_dir, split)
    keep_folders = None if templates is None else {TEMPLATE_FOLDERS[t] for t in templates}
    smean, sstd = np.array(stats["state"]["mean"]), np.array(stats["state"]["std"]) + 1e-6
    imgs, sts, lens, acts, bows, tasks, ins = [], [], [], [], [], [], []
    count: dict[str, int] = {}
    for i in range(len(ds)):
        ep = ds[i]
        task = str(ep["task"])
        if keep_folders is not None and task not in keep_folders:
            continue
        if max_per_template is not None and count.get(task, 0) >= max_per_template:
            continue
        if not bool(np.asarray(ep["has_view"])[0]):
            continue
        count[task] = count.get(task, 0) + 1
        im = np.asarray(ep["images"], np.uint8)[:, 0]
        imgs.append(im)
        sts.append(((np.asarray(ep["state"], np.float64) - smean) / sstd).astype(np.float32))
        lens.append(len(im))
        acts.append(normalize_actions(np.asarray(ep["action_rel"], np.float64), stats).astype(np.float32))
        bows.append(bag_of_words(str(ep["instruction"])))
        tasks.append(task)
        ins.append(str(ep["instruction"]))
    lengths = np.array(lens, np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if lens else np.zeros(0, np.int64)
    S = int(ds.features["images"].shape[2]) if len(ds) else 0
    return Demos(np.concatenate(imgs) if imgs else np.zeros((0, S, S, 3), np.uint8),
                 np.concatenate(sts) if sts else np.zeros((0, 7), np.float32), offsets, lengths, acts,
                 np.stack(bows) if bows else np.zeros((0, len(VOCAB)), np.float32), tasks, ins)


def samples(d: Demos) -> np.ndarray:
    """(n, 2) array of (episode, t) for every step with an action."""
    out = [(e, t) for e, n in enumerate(d.lengths) for t in range(n - 1)]
    return np.array(out, np.int64).reshape(-1, 2)


def pad_action(stats: dict[str, Any], gripper: float) -> np.ndarray:
    """A normalised zero-motion action holding `gripper` (pads chunks past the episode end)."""
    a = np.zeros((1, 7))
    a[0, 6] = gripper
    return normalize_actions(a, stats)[0].astype(np.float32)


def batch(d: Demos, idx: np.ndarray, H: int, K: int, stats: dict[str, Any]) -> dict[str, torch.Tensor]:
    img, st, bow, chunk, f0, f1 = [], [], [], [], [], []
    for e, t in idx:
        off, n = d.offsets[e], d.lengths[e]
        a = d.actions[e]
        c = a[t:t + H]
        if len(c) < H:
            c = np.concatenate([c, np.repeat(pad_action(stats, float(a[-1, 6]))[None], H - len(c), 0)])
        img.append(d.images[off + t])
        st.append(d.states[off + t])
        bow.append(d.bow[e])
        chunk.append(c)
        f0.append(d.images[off + t])
        f1.append(d.images[off + min(t + K, n - 1)])
    return {"image": torch.from_numpy(np.stack(img)), "state": torch.from_numpy(np.stack(st)),
            "bow": torch.from_numpy(np.stack(bow)), "actions": torch.from_numpy(np.stack(chunk)),
            "f0": torch.from_numpy(np.stack(f0)), "f1": torch.from_numpy(np.stack(f1))}


# ------------------------------------------------------------------------------------------ LAM
class Block(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.n1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.ff(self.n2(x))


class TinyLAM(nn.Module):
    """Moto-style latent motion tokenizer, tiny: embed (n_queries x d_embed), VQ n_codes x d_embed."""

    def __init__(self, image_size: int, d: int = 128, n_layers: int = 2, n_heads: int = 4, n_queries: int = 8,
                 d_embed: int = 16, n_codes: int = 32, beta: float = 0.25, stem_seed: int = 1234):
        super().__init__()
        self.stem = FrozenStem(LAMConfig(image_size=image_size, feat_channels=64, grid=max(image_size // 8, 1),
                                         stem_seed=stem_seed))
        P = max(image_size // 8, 1) ** 2
        self.inp = nn.Linear(64, d)
        self.queries = nn.Parameter(torch.randn(n_queries, d) * 0.02)
        self.sep = nn.Parameter(torch.randn(1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(n_queries + 2 * P + 1, d) * 0.02)
        self.mformer = nn.ModuleList([Block(d, n_heads) for _ in range(n_layers)])
        self.down = nn.Linear(d, d_embed)  # down-resampler -> continuous embed
        self.codebook = nn.Parameter(torch.randn(n_codes, d_embed) * 0.5)
        self.up = nn.Linear(d_embed, 64)  # up-resampler -> decoder channels
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.GELU(), nn.Conv2d(32, 64, 4, 2, 1), nn.GELU())
        self.dec = nn.Sequential(nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.GELU(), nn.ConvTranspose2d(32, 3, 4, 2, 1))
        self.nq, self.beta = n_queries, beta
        self.d_embed = d_embed

    def embed(self, f0: torch.Tensor, f1: torch.Tensor) -> torch.Tensor:
        """Continuous embed (B, nq, d_embed) of the frame pair (uint8 (B,S,S,3))."""
        c, tg = self.inp(self.stem(f0)), self.inp(self.stem(f1))
        B = c.shape[0]
        x = torch.cat([self.queries.expand(B, -1, -1), c, self.sep.expand(B, -1, -1), tg], 1) + self.pos
        for blk in self.mformer:
            x = blk(x)
        return self.down(x[:, :self.nq])

    def quantize(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        flat = e.reshape(-1, e.shape[-1])
        idx = torch.cdist(flat, self.codebook).argmin(-1)
        c = self.codebook[idx].view_as(e)
        # legacy Moto/VQ-VAE convention kept: beta multiplies the *codebook* term, not the commitment term
        vq = F.mse_loss(e, c.detach()) + self.beta * F.mse_loss(e.detach(), c)
        return e + (c - e).detach(), vq, idx.view(e.shape[:-1])

    def decode(self, f0: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x = f0.permute(0, 3, 1, 2).float() / 127.5 - 1.0
        h = self.enc(x) + self.up(z).mean(1)[:, :, None, None]  # motion added to every patch
        return self.dec(h)

    def loss(self, f0: torch.Tensor, f1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(L_LAM = pixel MSE + VQ, continuous embed)."""
        e = self.embed(f0, f1)
        z, vq, _ = self.quantize(e)
        target = f1.permute(0, 3, 1, 2).float() / 127.5 - 1.0
        return F.mse_loss(self.decode(f0, z), target) + vq, e


# ------------------------------------------------------------------------------------------ VLA
class TinyVLA(nn.Module):
    """[state ; obs (4x4 CNN grid) ; lang ; H action tokens] through a DiT; flow or mse head."""

    def __init__(self, H: int = 4, d: int = 128, n_blocks: int = 4, n_heads: int = 4, vocab: int = len(VOCAB),
                 head: str = "flow", align_dim: int = 128, align_index: int = -3):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.GELU(), nn.Conv2d(32, 64, 4, 2, 1), nn.GELU(),
                                 nn.Conv2d(64, d, 3, 2, 1), nn.AdaptiveAvgPool2d(4))
        self.lang = nn.Linear(vocab, d)
        self.state = nn.Linear(7, d)
        self.act_in = nn.Linear(7, d)
        self.act_q = nn.Parameter(torch.randn(H, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(2 + 16 + H, d) * 0.02)
        self.temb = nn.Sequential(nn.Linear(64, d), nn.GELU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList([Block(d, n_heads) for _ in range(n_blocks)])
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, 7)
        self.proj = nn.Linear(d, align_dim)  # W: h -> e-hat
        self.H, self.head, self.align_index = H, head, align_index

    def _tokens(self, b: dict[str, torch.Tensor], x_t: torch.Tensor | None, t: torch.Tensor | None) -> torch.Tensor:
        img = b["image"].permute(0, 3, 1, 2).float() / 127.5 - 1.0
        obs = self.cnn(img).flatten(2).transpose(1, 2)
        B = obs.shape[0]
        if self.head == "flow":
            freqs = torch.exp(torch.arange(32, dtype=torch.float32, device=t.device) * (-math.log(1000.0) / 32))
            ang = t[:, None] * 1000.0 * freqs[None]
            te = self.temb(torch.cat([ang.sin(), ang.cos()], -1))
            act = self.act_in(x_t) + te[:, None] + self.act_q
        else:
            act = self.act_q.expand(B, -1, -1)
        return torch.cat([self.state(b["state"])[:, None], obs, self.lang(b["bow"])[:, None], act], 1) + self.pos

    def forward(self, b: dict[str, torch.Tensor], x_t: torch.Tensor | None = None,
                t: torch.Tensor | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self._tokens(b, x_t, t)
        hidden = []
        for blk in self.blocks:
            x = blk(x)
            hidden.append(x)
        return self.out(self.norm(x[:, -self.H:])), hidden

    def loss(self, b: dict[str, torch.Tensor], gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(action loss, aligned hidden state h at list index -3, last token)."""
        a = b["actions"]
        if self.head == "flow":
            B = a.shape[0]
            s = torch.distributions.Beta(torch.tensor(1.5), torch.tensor(1.0)).sample((B,)).to(a.device)
            t = (0.999 - s) / 0.999
            eps = torch.randn(a.shape, generator=gen).to(a.device)
            x_t = (1 - t)[:, None, None] * eps + t[:, None, None] * a
            v, hidden = self(b, x_t, t)
            loss = F.mse_loss(v, a - eps)
        else:
            pred, hidden = self(b)
            loss = F.mse_loss(pred, a)
        return loss, hidden[self.align_index][:, -1]

    @torch.no_grad()
    def sample(self, b: dict[str, torch.Tensor], n_steps: int = 4, gen: torch.Generator | None = None,
               noise: torch.Tensor | None = None) -> torch.Tensor:
        """Euler integration of the flow from `noise` (default: drawn from `gen`), (B, H, 7)."""
        if self.head != "flow":
            return self(b)[0]
        B = b["state"].shape[0]
        x = torch.randn((B, self.H, 7), generator=gen) if noise is None else noise
        for k in range(n_steps):  # Euler from t = 0 (noise) to t = 1 (actions)
            t = torch.full((B,), k / n_steps)
            x = x + self(b, x, t)[0] / n_steps
        return x


def align_loss(e_hat: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """mean(1 - cos(e_hat, e)); invariant to the scale of e_hat."""
    return (1 - F.cosine_similarity(e_hat, e, dim=-1)).mean()


def joint_loss(vla: TinyVLA, lam: TinyLAM | None, b: dict[str, torch.Tensor], variant: str, w_align: float,
               w_lam: float, gen: torch.Generator | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """L = L_flow + w_align L_align + w_lam L_LAM (lara); frozen_align: e detached, no L_LAM; dit_only: L_flow."""
    l_act, h = vla.loss(b, gen)
    parts = {"action": l_act.item()}
    if variant == "dit_only" or lam is None:
        return l_act, parts
    if variant == "frozen_align":
        with torch.no_grad():
            e = lam.embed(b["f0"], b["f1"]).flatten(1)
        l_al = align_loss(vla.proj(h), e.detach())
        parts["align"] = l_al.item()
        return l_act + w_align * l_al, parts
    l_lam, e = lam.loss(b["f0"], b["f1"])  # e NOT detached: gradients reach the M-Former and resamplers
    l_al = align_loss(vla.proj(h), e.flatten(1))
    parts.update(align=l_al.item(), lam=l_lam.item())
    return l_act + w_align * l_al + w_lam * l_lam, parts


# ------------------------------------------------------------------------------------- training
def lr_factor(step: int, total: int, warmup: float) -> float:
    """`core.schedule.warmup_cosine` with the warm-up length this study always used: at least one step
    (max(1, int(warmup * total))); identical numbers to the former private `_cosine`."""
    return warmup_cosine(step, total, max(1, int(warmup * total)))


def make_vla(p: dict[str, Any]) -> TinyVLA:
    head = "mse" if p["variant"] == "lara_mse" else "flow"
    n = p["net"]
    return TinyVLA(H=p["horizon"], d=n["width"], n_blocks=n["blocks"], n_heads=n["heads"], head=head,
                   align_dim=n["lam_queries"] * n["lam_embed"])


def make_lam(p: dict[str, Any], image_size: int) -> TinyLAM:
    n = p["net"]
    return TinyLAM(image_size, d=n["lam_width"], n_layers=n["lam_layers"], n_heads=n["heads"],
                   n_queries=n["lam_queries"], d_embed=n["lam_embed"], n_codes=n["lam_codes"], beta=n["beta"])


@dataclass
class Resume:
    """Resumable training of one stage (`paperflow.core.checkpoint`, safetensors + JSON in `dir`).

    A stage may run several phases (S2 then S3); the checkpoint records the phase, the step inside it,
    the models (one `nn.ModuleDict`), the phase's optimizer, the torch and numpy RNGs, the noise
    generator and the log. `every`: checkpoint interval in steps (0: none); `stop_after`: checkpoint
    after that many steps of the stage (all phases counted) and stop (tests, preemption drills).
    """

    dir: Path
    every: int = 0
    stop_after: int | None = None
    job: str = ""  # hash of what the job depends on; a checkpoint of another job is discarded
    done: int = 0  # steps of earlier phases finished in this stage
    stopped: bool = False

    def saved_phase(self) -> str | None:
        import json
        import shutil

        from paperflow.core.checkpoint import STATE_FILE, has_checkpoint

        if not has_checkpoint(self.dir):
            return None
        extra = json.loads((Path(self.dir) / STATE_FILE).read_text())["extra"]
        if extra.get("job") != self.job:  # parameters, seed or data changed since it was written
            shutil.rmtree(self.dir, ignore_errors=True)
            return None
        return extra["phase"]

    def load(self, phase: str, model: nn.Module, opt: Any, rng: np.random.Generator, gen: torch.Generator | None,
             log: list[dict]) -> int:
        """Restore the checkpoint if it belongs to `phase`; returns the step to continue from."""
        from paperflow.core.checkpoint import load_training_state

        if self.saved_phase() != phase:
            return 0
        st = load_training_state(self.dir, model=model, optimizer=opt, np_rng=rng)
        ex = st["extra"]
        log[:] = ex["log"]
        if gen is not None:
            gen.set_state(torch.tensor(ex["gen_state"], dtype=torch.uint8))
        self.done = int(ex["done"])
        return st["step"]

    def after_step(self, phase: str, step_done: int, total: int, model: nn.Module, opt: Any,
                   rng: np.random.Generator, gen: torch.Generator | None, log: list[dict]) -> bool:
        """Checkpoint when due; True when the stage must stop now."""
        from paperflow.core.checkpoint import save_training_state

        stop = self.stop_after is not None and self.done + step_done >= self.stop_after
        due = self.every > 0 and step_done % self.every == 0 and step_done < total
        if stop or due:
            save_training_state(self.dir, model=model, optimizer=opt, step=step_done, np_rng=rng,
                                extra={"phase": phase, "done": self.done, "log": log, "job": self.job,
                                       "gen_state": None if gen is None else gen.get_state().tolist()})
        self.stopped = stop
        return stop

    def phase_done(self, steps: int) -> None:
        self.done += steps


def _models(vla: TinyVLA | None, lam: TinyLAM | None) -> nn.ModuleDict:
    return nn.ModuleDict({k: m for k, m in (("vla", vla), ("lam", lam)) if m is not None})


def train_lam(lam: TinyLAM, d: Demos, p: dict[str, Any], seed: int, log: list[dict],
              resume: Resume | None = None) -> bool:
    """Stage S1: the LAM alone on all train video (actions unused). False when stopped by `resume`."""
    from accelerate import Accelerator

    acc = Accelerator(cpu=not torch.cuda.is_available())
    opt = torch.optim.AdamW([q for q in lam.parameters() if q.requires_grad], lr=p["lr"], betas=(0.95, 0.999),
                            weight_decay=p["weight_decay"])
    rng = np.random.default_rng([seed, 1])
    start = resume.load("S1", _models(None, lam), opt, rng, None, log) if resume else 0
    lam, opt = acc.prepare(lam, opt)
    idx_all = samples(d)
    K = p["horizon"] - 1
    steps = p["s1_steps"]
    for step in range(start, steps):
        for g in opt.param_groups:
            g["lr"] = p["lr"] * lr_factor(step, steps, p["warmup"])
        b = batch(d, idx_all[rng.integers(len(idx_all), size=p["batch_size"])], p["horizon"], K, p["stats"])
        loss, _ = acc.unwrap_model(lam).loss(b["f0"].to(acc.device), b["f1"].to(acc.device))
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
        if step % p["log_every"] == 0 or step == steps - 1:
            log.append({"stage": "S1", "step": step, "lam": loss.item()})
        if resume and resume.after_step("S1", step + 1, steps, _models(None, acc.unwrap_model(lam)), opt, rng, None,
                                        log):
            return False
    return True


def train_joint(vla: TinyVLA, lam: TinyLAM | None, d: Demos, p: dict[str, Any], steps: int, seed: int, stage: str,
                log: list[dict], resume: Resume | None = None) -> bool:
    """Stages S2 / S3: the VLA (+ LAM unless frozen) with the variant's loss. False when stopped."""
    from accelerate import Accelerator

    if steps <= 0 or len(d.lengths) == 0:
        if resume:
            resume.phase_done(max(steps, 0))
        return True
    acc = Accelerator(cpu=not torch.cuda.is_available())
    variant = p["variant"]
    params = list(vla.parameters())
    if lam is not None:
        train_lam_too = variant in ("lara", "lara_mse")
        for name, q in lam.named_parameters():
            if not name.startswith("stem."):
                q.requires_grad_(train_lam_too)
        if train_lam_too:
            params += [q for q in lam.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=p["lr"], betas=(0.95, 0.999), weight_decay=p["weight_decay"])
    rng = np.random.default_rng([seed, 2 if stage == "S2" else 3])
    gen = torch.Generator().manual_seed(seed * 1000 + (2 if stage == "S2" else 3))
    start = resume.load(stage, _models(vla, lam), opt, rng, gen, log) if resume else 0
    vla = acc.prepare(vla)
    if lam is not None:
        lam = acc.prepare(lam)
    opt = acc.prepare(opt)
    idx_all = samples(d)
    for step in range(start, steps):
        for g in opt.param_groups:
            g["lr"] = p["lr"] * lr_factor(step, steps, p["warmup"])
        b = batch(d, idx_all[rng.integers(len(idx_all), size=p["batch_size"])], p["horizon"], p["horizon"] - 1,
                  p["stats"])
        b = {k: v.to(acc.device) for k, v in b.items()}
        loss, parts = joint_loss(vla, lam, b, variant, p["w_align"], p["w_lam"], gen)
        opt.zero_grad()
        acc.backward(loss)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % p["log_every"] == 0 or step == steps - 1:
            log.append({"stage": stage, "step": step, "loss": loss.item(), **parts})
        if resume and resume.after_step(stage, step + 1, steps,
                                        _models(acc.unwrap_model(vla), None if lam is None else acc.unwrap_model(lam)),
                                        opt, rng, gen, log):
            return False
    if resume:
        resume.phase_done(steps)
    return True


# ----------------------------------------------------------------------------------- evaluation
@torch.no_grad()
def offline_mse(vla: TinyVLA, d: Demos, p: dict[str, Any], seed: int, n_samples: int = 8) -> float:
    """Action-chunk MSE in normalised units on held-out demos; flow: mean of n_samples, fixed noise seed."""
    idx = samples(d)
    if len(idx) == 0:
        return float("nan")
    gen = torch.Generator().manual_seed(10_000 + seed)
    errs = []
    for i in range(0, len(idx), 256):
        b = batch(d, idx[i:i + 256], p["horizon"], p["horizon"] - 1, p["stats"])
        if vla.head == "flow":
            pred = torch.stack([vla.sample(b, p["euler_steps"], gen) for _ in range(n_samples)]).mean(0)
        else:
            pred = vla.sample(b)
        errs.append(((pred - b["actions"]) ** 2).mean(dim=(1, 2)).numpy())
    return float(np.concatenate(errs).mean())


@torch.no_grad()
def lam_probe(lam: TinyLAM, tr: Demos, te: Demos, p: dict[str, Any]) -> dict[str, Any]:
    """Action-centricity of the LAM embed (c.4-style ridge probe NMSE; K-step window action sums)."""
    from paperflow.robotics.api import ridge_probe

    def feats(d: Demos) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx = samples(d)
        K = p["horizon"] - 1
        idx = idx[[t + K <= d.lengths[e] - 1 for e, t in idx]] if len(idx) else idx
        zs, acts = [], []
        for i in range(0, len(idx), 256):
            b = batch(d, idx[i:i + 256], p["horizon"], K, p["stats"])
            zs.append(lam.embed(b["f0"], b["f1"]).flatten(1).numpy())
            acts.append(np.stack([d.actions[e][t:t + K, :6].sum(0) for e, t in idx[i:i + 256]]))
        if not zs:
            return np.zeros((0, 1)), np.zeros((0, 6)), np.zeros(0)
        return np.concatenate(zs), np.concatenate(acts), idx[:, 0]

    ztr, atr, gtr = feats(tr)
    zte, ate, _ = feats(te)
    if len(np.unique(gtr)) < 2 or len(zte) < 2:
        return {"nmse": float("nan"), "n_test": int(len(zte))}
    mu, sd = atr.mean(0), atr.std(0) + 1e-8
    res = ridge_probe(ztr, (atr - mu) / sd, gtr, {"test": (zte, (ate - mu) / sd)})
    return {"nmse": res["test"]["nmse"], "nmse_pooled": res["test"]["nmse_pooled"], "n_test": int(len(zte))}


class VLAPolicy:
    """Closed-loop policy: queried every step, executes chunk index `exec_index` (spec d.3)."""

    def __init__(self, vla: TinyVLA, stats: dict[str, Any], image_size: int, resize_mode: str, euler_steps: int,
                 exec_index: int = 0, seed: int = 0):
        self.vla, self.stats, self.S, self.mode = vla.eval(), stats, image_size, resize_mode
        self.euler, self.k, self.seed = euler_steps, exec_index, seed
        st = stats["state"]
        self.smean, self.sstd = np.array(st["mean"]), np.array(st["std"]) + 1e-6
        a = stats["action_rel"]
        self.lo, self.hi = np.array(a["q01"]), np.array(a["q99"])
        self.const = np.array(a["min"]) == np.array(a["max"])

    def reset(self, instruction: str) -> None:
        self.bow = bag_of_words(instruction)
        self.gen = torch.Generator().manual_seed(self.seed)

    def unnormalize(self, n: np.ndarray) -> np.ndarray:
        a = (np.clip(n, -1, 1) + 1) / 2 * (self.hi - self.lo) + self.lo
        a = np.where(self.const, self.lo, a)
        a[6] = 1.0 if n[6] > 0.5 else 0.0
        return a

    @torch.no_grad()
    def act(self, obs: dict[str, Any]) -> np.ndarray:
        img = np.array(resize(obs["images"][0], self.S, self.mode), copy=True)
        b = {"image": torch.from_numpy(img[None]),
             "state": torch.from_numpy(((obs["state"] - self.smean) / self.sstd).astype(np.float32)[None]),
             "bow": torch.from_numpy(self.bow[None])}
        chunk = self.vla.sample(b, self.euler, self.gen)[0].numpy()
        return self.unnormalize(chunk[self.k].astype(np.float64))

    # ---- batched closed loop (robotics `evaluate` runs a seed's episodes in lockstep with these) ----
    def reset_batch(self, instructions: list[str]) -> None:
        """One episode per instruction; each gets its own noise generator seeded as `reset` seeds one."""
        self.bows = [bag_of_words(i) for i in instructions]
        self.gens = [torch.Generator().manual_seed(self.seed) for _ in instructions]

    @torch.no_grad()
    def act_batch(self, obs: list[dict[str, Any]], idx: list[int]) -> list[np.ndarray]:
        """Actions for the episodes `idx` (still running) from their observations: one model call; each
        episode's flow noise from its own generator (the draws `act` would make episode by episode)."""
        if not obs:
            return []
        img = np.stack([np.array(resize(o["images"][0], self.S, self.mode), copy=True) for o in obs])
        st = np.stack([((o["state"] - self.smean) / self.sstd).astype(np.float32) for o in obs])
        b = {"image": torch.from_numpy(img), "state": torch.from_numpy(st),
             "bow": torch.from_numpy(np.stack([self.bows[i] for i in idx]))}
        noise = None
        if self.vla.head == "flow":
            noise = torch.cat([torch.randn((1, self.vla.H, 7), generator=self.gens[i]) for i in idx])
        chunks = self.vla.sample(b, self.euler, None, noise).numpy()
        return [self.unnormalize(c[self.k].astype(np.float64)) for c in chunks]


class RandomPolicy:
    """Uniform random actions inside the train action range (the ~0% reference)."""

    uses_images = False  # never looks at the observation: the closed loop renders nothing for it

    def __init__(self, stats: dict[str, Any], seed: int = 0):
        a = stats["action_rel"]
        self.lo, self.hi = np.array(a["q01"]), np.array(a["q99"])
        self.rng = np.random.default_rng(seed)

    def reset(self, instruction: str) -> None:
        pass

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        a = self.rng.uniform(self.lo, self.hi)
        a[6] = float(self.rng.random() < 0.5)
        return a


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of k/n (`core.stats.wilson`); (nan, nan) when n = 0."""
    from paperflow.core.stats import wilson as core_wilson

    if n == 0:
        return float("nan"), float("nan")
    e = core_wilson(k, n)
    return float(e.lo), float(e.hi)  # type: ignore[arg-type]


def sim_config(render: dict[str, Any], templates: list[str], overrides: dict[str, Any] | None = None) -> Any:
    from paperflow.robotics.api import SimConfig

    return SimConfig.from_dict({**render, **(overrides or {}), "templates": list(templates)})


def closed_loop(policy: Any, render: dict[str, Any], templates: list[str], ev: dict[str, Any], seed: int,
                overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Success rate by stepping the robotics simulator (`sim.evaluate`, blocking mode, held-out
    evaluation seeds offset by 10**6 from the data seeds) on `n_tasks` tasks x `episodes_per_task`."""
    from paperflow.robotics.api import evaluate_policy as evaluate
    from paperflow.robotics.api import task_list

    cfg = sim_config(render, templates, overrides)
    cfg.max_steps = ev["max_steps"]
    tasks = task_list(cfg, ev["n_tasks"], 10**6 + 1)
    r = evaluate(policy, cfg, ev["episodes_per_task"], ev["max_steps"], [seed], tasks=tasks)
    n = len(tasks) * ev["episodes_per_task"]
    k = int(round(r["success_rate"] * n))
    return {**r, "n": n, "k": k, "wilson95": wilson(k, n), "tasks": tasks}


def example_frames(policy: Any, render: dict[str, Any], templates: list[str], ev: dict[str, Any], seed: int,
                   every: int = 4) -> np.ndarray:
    """Slot-0 frames of one closed-loop episode (for the example-rollout figure)."""
    from paperflow.robotics.api import TabletopSim, task_list

    cfg = sim_config(render, templates)
    cfg.max_steps = ev["max_steps"]
    env = TabletopSim(cfg, 10**6 + seed)
    if hasattr(policy, "bind"):
        policy.bind(env)
    obs = env.reset(task_id=task_list(cfg, 1, 10**6 + 1)[0], episode_seed=0)
    policy.reset(obs["instruction"])
    frames = [obs["images"][0]]
    info = {"done": False}
    while not info["done"]:
        obs, info = env.step(policy.act(obs))
        if info["t"] % every == 0 or info["done"]:
            frames.append(obs["images"][0])
    return np.stack(frames[:8])
