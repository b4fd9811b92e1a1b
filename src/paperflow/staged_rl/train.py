"""Warm-up (supervised, resumable), the base model's perception filter, the RL stages (grpo_lite), the
caption-SFT stage, the arms and their evaluation after every stage."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperflow.core.checkpoint import STATE_FILE, has_checkpoint, load_training_state, save_training_state
from paperflow.core.seeding import seed_everything, stream
from paperflow.nn.grpo import group_advantages, grpo_loss
from paperflow.nn.transformer import Transformer
from paperflow.staged_rl.data import CAPTION, IMAGE, VIS, subset
from paperflow.staged_rl.model import (Prompts, build_policy, generate, make_prompts, parse, rewards, see_correct,
                                       supervised_batch, supervised_loss, token_logprobs)

log = logging.getLogger(__name__)

# arm → its stages, in order: (stage kind, which share of the budget). Stage kinds: perc (filtered D_perc),
# perc_unf (unfiltered D_perc), text, vis, merged (the three sets mixed in the split's proportions), capsft
# (supervised colour-count vector, caption-SFT). Budget shares index rl.split = [P, T, V]; "all" = their sum.
ARMS: dict[str, list[tuple[str, str]]] = {
    "base": [],
    "merged": [("merged", "all")],
    "p_t_v": [("perc", "P"), ("text", "T"), ("vis", "V")],
    "t_p_v": [("text", "T"), ("perc", "P"), ("vis", "V")],
    "v_t_p": [("vis", "V"), ("text", "T"), ("perc", "P")],
    "v_only": [("vis", "all")],
    "pu_t_v": [("perc_unf", "P"), ("text", "T"), ("vis", "V")],
    "capsft_t_v": [("capsft", "P"), ("text", "T"), ("vis", "V")],
}
TEST_SETS = ("perc", "text", "vis")


def stage_updates(arm: str, split: list[int]) -> list[tuple[str, int]]:
    share = {"P": split[0], "T": split[1], "V": split[2], "all": sum(split)}
    return [(kind, int(share[s])) for kind, s in ARMS[arm]]


# ------------------------------------------------------------------------------------------------- warm-up
def warmup(p: Mapping[str, Any], d: Mapping[str, np.ndarray], protos: np.ndarray, seed: int, ckpt_dir: Path,
           stop_after: int | None = None) -> tuple[Transformer | None, list[dict[str, float]]]:
    """Supervised warm-up of one seed's base policy (resumable from `ckpt_dir`)."""
    seed_everything(seed)
    net = build_policy(p, protos.shape[1])
    data = supervised_batch(d, protos, float(p["sigma_img"]), float(p["warmup_look_rate"]),
                            stream(seed, "warmup_looks"))
    n, bs, total = data["tokens"].shape[0], int(p["warmup_batch"]), int(p["warmup_steps"])
    opt = torch.optim.AdamW(net.parameters(), lr=float(p["warmup_lr"]), weight_decay=0.01)
    start = 0
    if has_checkpoint(ckpt_dir):
        start = load_training_state(ckpt_dir, model=net, optimizer=opt)["step"]
        log.info("resumed warm-up s%d at step %d", seed, start)
    per_epoch = max(1, n // bs)
    order = np.empty(0, np.int64)
    hist: list[dict[str, float]] = []
    every = int(p["ckpt_every"])
    for step in range(start, total):
        epoch, j = divmod(step, per_epoch)
        if j == 0 or order.size == 0:
            order = stream(seed, "warmup_epoch", epoch).permutation(n)
        idx = torch.from_numpy(order[j * bs:(j + 1) * bs])
        loss = supervised_loss(net, {k: v[idx] for k, v in data.items()})
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == total - 1:
            hist.append({"step": step, "loss": loss.item()})
        if every and (step + 1) % every == 0 and step + 1 < total:
            save_training_state(ckpt_dir, model=net, optimizer=opt, step=step + 1)
            if stop_after is not None and step + 1 >= stop_after:
                return None, hist
    return net, hist


@torch.no_grad()
def greedy_answers(net: Transformer, pr: Prompts, protos: np.ndarray, p: Mapping[str, Any],
                   seed: int) -> tuple[list[int | None], Any]:
    gen = torch.Generator().manual_seed(seed)
    ro = generate(net, pr, torch.from_numpy(protos), float(p["sigma_img"]), greedy=True,
                  max_new=int(p["max_new"]), max_looks=int(p["max_looks"]), gen=gen)
    return parse(ro)[1], ro


def filter_keep(img_ans: list[int | None], cap_ans: list[int | None], gold: list[int]) -> list[int]:
    """Indices kept by the repo's rule for one filter model: the image answer is parseable (not None) and
    wrong, and the caption answer is right. An unparseable image answer is not a failure (not kept)."""
    return [i for i, (a, c, g) in enumerate(zip(img_ans, cap_ans, gold)) if a is not None and a != g and c == g]


def perception_filter(net: Transformer, pool: Mapping[str, np.ndarray], protos: np.ndarray, p: Mapping[str, Any],
                      seed: int) -> dict[str, Any]:
    """The spec's filter with the base model as the only filter model: keep an MCQ iff the greedy answer from
    the image is parseable and wrong, and the greedy answer from the caption is right."""
    width = int(p["n_slots"]) + 8
    img_ans, _ = greedy_answers(net, make_prompts(pool, IMAGE, width), protos, p, seed)
    cap_ans, _ = greedy_answers(net, make_prompts(pool, CAPTION, width), protos, p, seed)
    gold = pool["answer"].tolist()
    keep = filter_keep(img_ans, cap_ans, gold)
    n = len(gold)
    return {"keep": keep, "n_pool": n, "img_acc": float(np.mean([a == g for a, g in zip(img_ans, gold)])),
            "cap_acc": float(np.mean([c == g for c, g in zip(cap_ans, gold)])),
            "img_unparseable": float(np.mean([a is None for a in img_ans]))}


# -------------------------------------------------------------------------------------------------- evaluate
@torch.no_grad()
def evaluate(net: Transformer, tests: Mapping[str, Prompts], protos: np.ndarray, p: Mapping[str, Any],
             seed: int) -> dict[str, Any]:
    """Greedy decoding on every test set: accuracy, `<see>` accuracy, perception-error share (vis), emitted
    tokens and `<look>` rate, and the per-item correctness (for bootstraps)."""
    out: dict[str, Any] = {}
    for name, pr in tests.items():
        gen = torch.Generator().manual_seed(int(p["eval_seed"]) * 1000 + seed)
        ro = generate(net, pr, torch.from_numpy(protos), float(p["sigma_img"]), greedy=True,
                      max_new=int(p["max_new"]), max_looks=int(p["max_looks"]), gen=gen)
        _, correct = rewards(pr, ro, 0.0)
        seen = see_correct(pr, ro)
        wrong = ~correct
        r: dict[str, Any] = {"acc": float(correct.float().mean()), "tokens": float(ro.n_tokens.float().mean()),
                             "look_rate": float(ro.n_looks.float().mean()),
                             "correct": correct.int().tolist()}
        if name != "text":
            r["see_acc"] = float(seen.float().mean())
        if name == "vis":
            n_wrong = int(wrong.sum())
            n_perc_err = int((wrong & ~seen).sum())
            r["n_wrong"] = n_wrong
            r["n_wrong_perception"] = n_perc_err
            r["perception_error_share"] = n_perc_err / n_wrong if n_wrong else float("nan")
        out[name] = r
    return out


# ------------------------------------------------------------------------------------------------------- RL
class ArmCheckpoint:
    """Resumable position of one arm through `core.checkpoint`: the policy (and the stage's KL reference), the
    stage's optimizer, the arm's numpy stream and sampling generator, the torch RNG, the position (stage index,
    update within the stage), the finished stages' records and the current stage's history. Saved every
    `every` updates of the arm (RL updates and caption-SFT steps, counted across stages; 0: never) and at
    `stop_after` (tests: a run "killed" after that many updates; the arm then returns None). Without `path`
    it only counts."""

    def __init__(self, path: Path | None, every: int = 0, stop_after: int | None = None):
        self.path, self.every, self.stop_after = path, int(every), stop_after
        self.step = 0  # updates the arm has done (all stages)
        self.stage = 0  # index of the current stage
        self.done: list[dict[str, Any]] = []  # finished stages' records
        self.seconds = 0.0  # training time before this process (a resumed arm)
        self._stage_rng: dict[str, Any] | None = None
        self._pending: dict[str, Any] | None = None
        if path is not None and has_checkpoint(path):
            self._pending = json.loads((path / STATE_FILE).read_text())["extra"]
            self.stage, self.done = int(self._pending["stage"]), list(self._pending["stages"])
            self.seconds = float(self._pending["seconds"])

    def begin(self, rng: np.random.Generator) -> None:
        """At a stage's start, before anything draws from `rng`: remember its state there (a resumed stage
        rebuilds what it drew, e.g. caption-SFT's noisy rows, from the same state)."""
        if self._pending is not None:
            rng.bit_generator.state = self._pending["stage_rng"]
        self._stage_rng = rng.bit_generator.state

    def restore(self, net: Transformer, opt: torch.optim.Optimizer, ref: Transformer | None,
                rng: np.random.Generator, gen: torch.Generator | None) -> tuple[int, list[dict[str, float]]]:
        """(first update, history so far) of the current stage: (0, []) unless resuming it."""
        if self._pending is None:
            return 0, []
        st = load_training_state(self.path, model=_modules(net, ref), optimizer=opt, np_rng=rng)
        ex, self._pending = st["extra"], None
        self.step = int(st["step"])
        if gen is not None:
            gen.set_state(torch.tensor(ex["gen"], dtype=torch.uint8))
        log.info("resumed at update %d (stage %d, update %d)", self.step, self.stage, ex["update"])
        return int(ex["update"]), list(ex["hist"])

    def after_update(self, u: int, hist: list[dict[str, float]], net: Transformer, opt: torch.optim.Optimizer,
                     ref: Transformer | None, rng: np.random.Generator, gen: torch.Generator | None,
                     elapsed: float) -> bool:
        """Count one update (`u` of the stage done); save when due. True: stop here (stop_after reached)."""
        self.step += 1
        stop = self.stop_after is not None and self.step >= self.stop_after
        if self.path is not None and ((self.every and self.step % self.every == 0) or stop):
            save_training_state(self.path, model=_modules(net, ref), optimizer=opt, step=self.step, np_rng=rng,
                                extra={"stage": self.stage, "update": u, "hist": hist, "stages": self.done,
                                       "stage_rng": self._stage_rng, "seconds": self.seconds + elapsed,
                                       "gen": gen.get_state().tolist() if gen is not None else None})
        return stop


def _modules(net: Transformer, ref: Transformer | None) -> torch.nn.Module:
    return torch.nn.ModuleDict({"policy": net, **({"ref": ref} if ref is not None else {})})


def rl_stage(net: Transformer, sets: list[tuple[Prompts, float]], updates: int, p: Mapping[str, Any],
             protos: np.ndarray, rng: np.random.Generator, gen: torch.Generator,
             ck: ArmCheckpoint | None = None) -> list[dict[str, float]] | None:
    """`updates` grpo_lite updates: each draws `prompts_per_update` prompts (the set of each by its weight),
    samples G completions per prompt, group-normalised advantages, one clipped-surrogate step (+ β·k3 KL to the
    stage's initial policy). Resumes from / saves to `ck`; None when `ck` stopped it."""
    import copy

    G, n_prompts = int(p["group_size"]), int(p["prompts_per_update"])
    sets = [(s, wt) for s, wt in sets if len(s) > 0 and wt > 0]  # an empty D_perc (filter kept nothing) drops out
    if not sets:
        return []
    ck = ck or ArmCheckpoint(None)
    ck.begin(rng)
    beta = float(p["kl_beta"])
    ref = copy.deepcopy(net).eval() if beta > 0 else None
    opt = torch.optim.AdamW(net.parameters(), lr=float(p["lr"]), weight_decay=0.0)
    start, hist = ck.restore(net, opt, ref, rng, gen)
    w = np.array([s[1] for s in sets], float)
    w = w / w.sum()
    protos_t = torch.from_numpy(protos)
    t0 = time.perf_counter()
    for u in range(start, updates):
        which = rng.choice(len(sets), size=n_prompts, p=w)
        parts = [sets[k][0].take(torch.from_numpy(rng.integers(0, len(sets[k][0]), size=int((which == k).sum()))))
                 for k in range(len(sets)) if (which == k).any()]
        pr = Prompts(*(torch.cat([getattr(x, f) for x in parts]) for f in Prompts.__dataclass_fields__)).repeat(G)
        net.eval()
        ro = generate(net, pr, protos_t, float(p["sigma_img"]), greedy=False, max_new=int(p["max_new"]),
                      max_looks=int(p["max_looks"]), gen=gen)
        r, correct = rewards(pr, ro, float(p["look_cost"]))
        adv = group_advantages(r.view(-1, G)).reshape(-1)
        net.train()
        logp, mask = token_logprobs(net, ro)
        logp_ref = None
        if ref is not None:
            with torch.no_grad():
                logp_ref, _ = token_logprobs(ref, ro)
        loss = grpo_loss(logp, logp.detach(), adv, mask, clip_eps=float(p["clip_eps"]), beta=beta, logp_ref=logp_ref)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if u % 10 == 0 or u == updates - 1:
            hist.append({"update": u, "reward": float(r.mean()), "acc": float(correct.float().mean()),
                         "looks": float(ro.n_looks.float().mean()), "tokens": float(ro.n_tokens.float().mean())})
        if ck.after_update(u + 1, hist, net, opt, ref, rng, gen, time.perf_counter() - t0):
            return None
    net.eval()
    return hist


def caption_sft(net: Transformer, d: Mapping[str, np.ndarray], updates: int, p: Mapping[str, Any],
                protos: np.ndarray, rng: np.random.Generator,
                ck: ArmCheckpoint | None = None) -> list[dict[str, float]] | None:
    """Caption-SFT in place of Stage 1: cross-entropy on the colour-count vector `<see> n_r n_o n_g n_b </see>`
    of the image, `updates` steps of prompts_per_update × G rows [recon: the repo ships only a script name].
    Resumes from / saves to `ck`; None when `ck` stopped it."""
    ck = ck or ArmCheckpoint(None)
    ck.begin(rng)
    data = supervised_batch(d, protos, float(p["sigma_img"]), 0.0, rng)
    opt = torch.optim.AdamW(net.parameters(), lr=float(p["sft_lr"]), weight_decay=0.0)
    start, hist = ck.restore(net, opt, None, rng, None)
    bs = int(p["prompts_per_update"]) * int(p["group_size"])
    net.train()
    t0 = time.perf_counter()
    for u in range(start, updates):
        idx = torch.from_numpy(rng.integers(0, data["tokens"].shape[0], size=bs))
        loss = supervised_loss(net, {k: v[idx] for k, v in data.items()})
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        hist.append({"update": u, "loss": loss.item()})
        if ck.after_update(u + 1, hist, net, opt, None, rng, None, time.perf_counter() - t0):
            return None
    net.eval()
    return hist


def arm_stages(arm: str, sets: Mapping[str, Any], split: list[int]) -> list[tuple[str, str, int, list[Any]]]:
    """The arm's stages in order: (recorded name, kind rl|capsft|skip, updates, the RL sets with weights)."""
    if arm == "merged":  # the same three sets, mixed, evaluated at the staged arms' stage boundaries
        mix = [(sets["perc"], split[0]), (sets["text"], split[1]), (sets["vis"], split[2])]
        return [(f"merged@{sum(split[:i + 1])}", "rl", split[i], mix) for i in range(3)]
    out: list[tuple[str, str, int, list[Any]]] = []
    for kind, upd in stage_updates(arm, split):
        if kind == "capsft":
            out.append((kind, "capsft", upd, []))
        elif kind in ("perc", "perc_unf") and len(sets[kind]) == 0:
            out.append((kind, "skip", 0, []))  # the filter kept nothing: the stage is skipped (recorded)
        else:
            out.append((kind, "rl", upd, [(sets[kind], 1.0)]))
    return out


def run_arm(arm: str, net: Transformer, sets: Mapping[str, Any], tests: Mapping[str, Prompts],
            protos: np.ndarray, p: Mapping[str, Any], seed: int, ckpt: Path | None = None,
            stop_after: int | None = None) -> dict[str, Any] | None:
    """Run one arm from the base policy `net` (modified in place); evaluate after every stage.

    With `ckpt` (a directory), the arm's training state is saved there every `ckpt_every` updates and a rerun
    resumes from it, ending bit-identical to an uninterrupted run; `stop_after` stops after that many updates
    (saved; returns None)."""
    rng = stream(seed, "arm", arm)
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    ck = ArmCheckpoint(ckpt, int(p.get("ckpt_every", 0)), stop_after)
    t0 = time.perf_counter()
    for si, (name, kind, upd, rl_sets) in enumerate(arm_stages(arm, sets, [int(x) for x in p["split"]])):
        if si < ck.stage:
            continue  # finished before the restart (its record is in ck.done)
        ck.stage = si
        hist: list[dict[str, float]] | None = []
        if kind == "capsft":
            hist = caption_sft(net, sets["describe"], upd, p, protos, rng, ck)
        elif kind == "rl" and upd:
            hist = rl_stage(net, rl_sets, upd, p, protos, rng, gen, ck)
        if hist is None:
            return None
        ck.done.append({"stage": name, "updates": upd, "history": hist,
                        "eval": evaluate(net, tests, protos, p, seed)})
    return {"stages": ck.done, "seconds": ck.seconds + time.perf_counter() - t0}


def run_arms(arms: list[str], base_net: Transformer, base_eval: Mapping[str, Any], sets: Mapping[str, Any],
             tests: Mapping[str, Prompts], protos: np.ndarray, p: Mapping[str, Any], seed: int,
             ckpt: Path | None = None) -> dict[str, Any]:
    """Every arm of one job from the base policy (each from a fresh copy, the global seed reset).

    With `ckpt` (a directory): a finished arm's result is kept as `<ckpt>/<arm>.json` and an unfinished arm's
    training state under `<ckpt>/<arm>/`, so a restarted job redoes neither; state written under other
    parameters (anything but `ckpt_every` and the job's arm list) is dropped first."""
    import copy

    from paperflow.core.checkpoint import finished_unit, keep_unit, stamp_job_dir

    if ckpt is not None:
        stamp = {"params": {k: v for k, v in p.items() if k not in ("ckpt_every", "arms", "chunk")},
                 "seed": int(seed)}
        if stamp_job_dir(ckpt, stamp):
            log.info("dropped training state saved under other parameters: %s", ckpt)
    out: dict[str, Any] = {}
    for arm in arms:
        if arm == "base":
            out[arm] = {"stages": [{"stage": "base", "updates": 0, "history": [], "eval": base_eval}],
                        "seconds": 0.0}
            continue
        kept = finished_unit(ckpt, arm)
        if kept is not None:
            out[arm] = kept
            continue
        seed_everything(seed)
        r = run_arm(arm, copy.deepcopy(base_net), sets, tests, protos, p, seed,
                    ckpt / arm if ckpt is not None else None)
        assert r is not None
        out[arm] = r
        keep_unit(ckpt, arm, r)
    return out


def load_sets(data: Path, filt: Mapping[str, Any], p: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The RL sets of one seed as prompts: filtered and unfiltered D_perc, D_text, D_vis; describe rows."""
    from paperflow.staged_rl.data import load_split

    width = int(p["n_slots"]) + 8
    pool = load_split(data, "perc_pool")
    keep = np.asarray(filt["keep"], np.int64)
    unf = stream(seed, "unfiltered").choice(len(pool["task"]), size=max(len(keep), 1), replace=False)
    return {"perc": make_prompts(subset(pool, keep), None, width), "perc_unf": make_prompts(subset(pool, unf), None,
                                                                                                width),
            "text": make_prompts(load_split(data, "text_rl"), None, width),
            "vis": make_prompts(load_split(data, "vis_rl"), None, width), "describe": load_split(data, "describe")}


def load_tests(data: Path, p: Mapping[str, Any]) -> dict[str, Prompts]:
    from paperflow.staged_rl.data import load_split

    width = int(p["n_slots"]) + 8
    return {k: make_prompts(load_split(data, f"test_{k}"), None, width) for k in TEST_SETS}


__all__ = ["ARMS", "VIS", "ArmCheckpoint", "arm_stages", "caption_sft", "evaluate", "load_sets", "load_tests",
           "perception_filter", "rl_stage", "run_arm", "run_arms", "stage_updates", "warmup"]
