"""`rl.backend: trl` — the same items and reward terms on TRL's GRPOTrainer (`paperflow.nn.trl_grpo`).

The policy is a Hugging Face causal LM that reads a text rendering of the item and writes the answer token
followed by its trace (`a2 t0 t1 t4`). At test scale it is `nn.trl_grpo.tiny_llama` with a word-level
tokenizer; at paper scale `rl.trl.model_path` names a staged (V)LM checkpoint (config/paper.yaml).

Text rendering (our choice): each frame becomes `f<i>` followed by the objects whose presence dim exceeds 0.5
(`o<k>`) and its motion code (`m<c>`, from the two motion dims); the question `q_first` or `q_count k<k>`;
each hypothesis `h a<a> t<i> …`; then `ans`. Parsing: the first completion token must be `a<0..4>` (r_fmt = 1),
the trace is the set of `t<i>` tokens after it. U = r_acc + w_fmt·r_fmt + λ₁·DUS + λ₂·PTS, per arm as in
`rewards.ARM_REWARDS` (the same functions as the grpo_lite backend).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.video_bci.data import N_OBJ, N_OPT, prior_stats
from paperflow.video_bci.rewards import ARM_REWARDS, dus, jaccard, pts, r_acc


def vocab(T: int) -> list[str]:
    return ([f"f{i}" for i in range(T)] + [f"o{k}" for k in range(N_OBJ)] + [f"m{c}" for c in range(4)]
            + ["q_first", "q_count"] + [f"k{k}" for k in range(N_OBJ)] + ["h"] + [f"a{a}" for a in range(N_OPT)]
            + [f"t{i}" for i in range(T)] + ["ans"])


def render(d: Mapping[str, np.ndarray], i: int, with_hyps: bool) -> str:
    fr = d["frames"][i]
    words: list[str] = []
    for t, v in enumerate(fr):
        motion = int(v[N_OBJ] > 0.5) + 2 * int(v[N_OBJ + 1] > 0.5)
        words += [f"f{t}"] + [f"o{k}" for k in range(N_OBJ) if v[k] > 0.5] + [f"m{motion}"]
    words += ["q_first"] if int(d["qtype"][i]) == 0 else ["q_count", f"k{int(d['qobj'][i])}"]
    if with_hyps:
        words += hypothesis_words(d, i)
    return " ".join(words + ["ans"])


def hypothesis_words(d: Mapping[str, np.ndarray], i: int) -> list[str]:
    """`h a<a> t<i>…` per prior (an unparsed self-sampled prior, a = −1, has no answer word)."""
    words: list[str] = []
    for a, tr in zip(d["prior_ans"][i], d["prior_trace"][i]):
        words += ["h"] + ([f"a{int(a)}"] if a >= 0 else []) + [f"t{t}" for t in np.flatnonzero(tr)]
    return words


def parse(completion: str, T: int) -> tuple[int, np.ndarray, bool]:
    """(answer or -1, trace bits [T], well-formed)."""
    toks = completion.split()
    trace = np.zeros(T, dtype=np.uint8)
    if not toks or not (toks[0].startswith("a") and toks[0][1:].isdigit() and int(toks[0][1:]) < N_OPT):
        return -1, trace, False
    for w in toks[1:]:
        if w.startswith("t") and w[1:].isdigit() and int(w[1:]) < T:
            trace[int(w[1:])] = 1
    return int(toks[0][1:]), trace, True


def rows(d: Mapping[str, np.ndarray], idx: np.ndarray, with_hyps: bool) -> dict[str, list[Any]]:
    """TRL dataset columns: prompt + what the rewards need (y, p̂, Ĥ, majority, priors)."""
    st = prior_stats(d)
    return {"prompt": [render(d, int(i), with_hyps) for i in idx], "y": [int(d["y"][i]) for i in idx],
            "p_hat": [st["p_hat"][i].tolist() for i in idx], "H_hat": [float(st["H_hat"][i]) for i in idx],
            "majority": [int(st["majority"][i]) for i in idx],
            "prior_ans": [d["prior_ans"][i].astype(int).tolist() for i in idx],
            "prior_trace": [d["prior_trace"][i].astype(int).tolist() for i in idx]}


def reward_fn(arm: str, p: Mapping[str, Any], T: int) -> Callable[..., list[float]]:
    """TRL reward function for one arm: fn(completions, y, p_hat, H_hat, majority, prior_ans, prior_trace)."""
    use_dus, use_pts, ent_w = ARM_REWARDS[arm]

    def fn(completions: list[Any], y: list[int], p_hat: list[list[float]], H_hat: list[float], majority: list[int],
           prior_ans: list[list[int]], prior_trace: list[list[list[int]]], **_: Any) -> list[float]:
        parsed = [parse(c if isinstance(c, str) else c[-1]["content"], T) for c in completions]
        ans = np.array([a for a, _, _ in parsed])
        tr = np.stack([t for _, t, _ in parsed])
        fmt = np.array([ok for _, _, ok in parsed], dtype=float)
        yy, H = np.asarray(y), np.asarray(H_hat, dtype=float)
        safe = np.where(ans >= 0, ans, 0)
        u = r_acc(ans, yy)
        if ent_w:
            u = u * (1.0 + float(p["lambda_dus"]) * H)
        if use_dus:
            mode = "bonus" if arm == "dus_bonus" else str(p["dus_mode"])
            u = u + float(p["lambda_dus"]) * dus(safe, yy, np.asarray(p_hat), H, np.asarray(majority), mode) * (ans >= 0)
        if use_pts:
            u = u + float(p["lambda_pts"]) * pts(safe, tr, yy, np.asarray(prior_ans), np.asarray(prior_trace),
                                                 str(p["pts_gate"]))
        return (u + float(p["w_fmt"]) * fmt).tolist()

    return fn


def settings(p: Mapping[str, Any], seed: int, steps: int | None = None, save_steps: int = 0) -> Any:
    from paperflow.nn.trl_grpo import GRPOSettings

    return GRPOSettings(num_generations=int(p["group_size"]), prompts_per_step=int(p["trl_prompts_per_step"]),
                        max_completion_length=int(p["trl_max_completion_length"]),
                        max_steps=int(steps if steps is not None else p["updates"]),
                        learning_rate=float(p["trl_lr"]), beta=float(p["trl_beta"]), epsilon=float(p["clip_eps"]),
                        seed=seed, use_cpu=not _cuda(), save_steps=save_steps)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def load_policy(p: Mapping[str, Any], T: int, seed: int) -> tuple[Any, Any]:
    """(model, tokenizer): a staged checkpoint when `trl_model_path` is set, else a random tiny Llama."""
    from paperflow.nn.trl_grpo import tiny_llama, word_tokenizer

    if p.get("trl_model_path"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = str(p["trl_model_path"])
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    tok = word_tokenizer(vocab(T))
    return tiny_llama(len(tok), hidden=int(p["trl_hidden"]), layers=int(p["trl_layers"]), seed=seed), tok


def generate(model: Any, tok: Any, prompts: list[str], max_new: int) -> list[str]:
    """Greedy completions (the evaluation's one integration pass)."""
    import torch

    model.eval()
    out: list[str] = []
    tok.padding_side = "left"
    with torch.no_grad():
        for i in range(0, len(prompts), 64):
            enc = tok(prompts[i:i + 64], return_tensors="pt", padding=True)
            enc.pop("token_type_ids", None)
            gen = model.generate(**enc.to(model.device), max_new_tokens=max_new, do_sample=False,
                                 pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
            out += tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return out


# --- rl.trl_vlm: the frames as images -----------------------------------------------------------------------

def frame_image(v: np.ndarray, block: int = 4) -> np.ndarray:
    """uint8 [S, S, 3]: one frame's vector as a square grid of grey blocks (value x → clip(128 + 100·x))."""
    from paperflow.nn.trl_vlm import vector_image

    return vector_image(v, 100.0, block)


def vlm_problem(d: Mapping[str, np.ndarray], i: int, with_hyps: bool) -> str:
    """The text rendering with each frame's words replaced by `f<t> <image>` (the frame itself is the image)."""
    from paperflow.nn.trl_vlm import IMAGE_PLACEHOLDER

    T = d["frames"].shape[1]
    words: list[str] = []
    for t in range(T):
        words += [f"f{t}", IMAGE_PLACEHOLDER]
    words += ["q_first"] if int(d["qtype"][i]) == 0 else ["q_count", f"k{int(d['qobj'][i])}"]
    if with_hyps:
        words += hypothesis_words(d, i)
    return " ".join(words + ["ans"])


def vlm_rows(d: Mapping[str, np.ndarray], idx: np.ndarray, with_hyps: bool, path: Path) -> dict[str, list[Any]]:
    """Write the items as EasyR1-layout parquet (T frame images per row + the reward columns) and read them back."""
    from paperflow.nn.trl_vlm import read_easyr1, write_easyr1

    cols = rows(d, idx, with_hyps)
    extra = {k: v for k, v in cols.items() if k != "prompt"}
    write_easyr1(path, [vlm_problem(d, int(i), with_hyps) for i in idx], [str(int(d["y"][i])) for i in idx],
                 [[frame_image(f) for f in d["frames"][int(i)]] for i in idx], extra)
    return read_easyr1(path)


def load_vlm_policy(p: Mapping[str, Any], T: int, seed: int) -> tuple[Any, Any]:
    """(model, processor): a staged VLM when `trl_model_path` is set, else a random tiny LLaVA."""
    from paperflow.nn import trl_vlm

    if p.get("trl_model_path"):
        return trl_vlm.load_vlm(str(p["trl_model_path"]))
    proc = trl_vlm.word_processor(vocab(T))
    return trl_vlm.tiny_llava(proc, hidden=int(p["trl_hidden"]), layers=int(p["trl_layers"]), seed=seed), proc


def train_arm_trl(arm: str, train: Mapping[str, np.ndarray], p: Mapping[str, Any], seed: int, workdir: Path,
                  steps: int | None = None, save_steps: int = 0,
                  stop_after: int | None = None) -> tuple[Any, Any, list[dict[str, float]] | None]:
    """TRL GRPO on one arm; returns (model, tokenizer, TRL's per-step log). With `save_steps` > 0 the Trainer
    checkpoints into `workdir/<arm>` and a rerun resumes there (`nn.trl_grpo.train`); `stop_after`: tests."""
    from paperflow.core.seeding import stream
    from paperflow.nn.trl_grpo import train as trl_train

    T = train["frames"].shape[1]
    n = len(train["y"])
    idx = np.arange(n)
    if arm == "resampled":
        rng = stream(seed, "resampled")
        hard, easy = np.flatnonzero(train["hard"] == 1), np.flatnonzero(train["hard"] == 0)
        is_hard = rng.random(n) < float(p["resample_hard_frac"])
        idx = np.where(is_hard, hard[rng.integers(0, len(hard), n)], easy[rng.integers(0, len(easy), n)])
    if p.get("trl_vlm"):
        model, tok = load_vlm_policy(p, T, seed)
        data = vlm_rows(train, idx, arm != "direct", workdir / f"{arm}.train.parquet")
    else:
        model, tok = load_policy(p, T, seed)
        data = rows(train, idx, arm != "direct")
    log = trl_train(model, tok, data,
                    [reward_fn("racc" if arm == "direct" else arm, p, T)], settings(p, seed, steps, save_steps),
                    workdir / arm, stop_after=stop_after)
    return model, tok, log


def self_priors(model: Any, tok: Any, d: Mapping[str, np.ndarray], p: Mapping[str, Any], seed: int,
                workdir: Path, name: str) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """`prior_source: self` (the paper's setting): the N priors of every item sampled from the policy's own
    no-hypothesis pass (temperature `rl.self_prior_temperature`, ≤ `trl_max_completion_length` new tokens,
    seeded), parsed into answers (−1 when unparseable) and traces; `majority` (mode of the parsed answers,
    seeded tie-break; −1 when none) and `absent` recomputed. Returns (the split with its priors replaced, stats)."""
    import torch

    from paperflow.core.seeding import stream

    T, N = d["frames"].shape[1], d["prior_ans"].shape[1]
    n = len(d["y"])
    temp, max_new = float(p["self_prior_temperature"]), int(p["trl_max_completion_length"])
    torch.manual_seed(seed)
    if p.get("trl_vlm"):
        from paperflow.nn.trl_vlm import sample_answers

        rows = vlm_rows(d, np.arange(n), False, workdir / f"{name}.priors.parquet")
        comps = sample_answers(model, tok, rows, max_new, N, temp)
    else:
        comps = sample_text(model, tok, [render(d, i, False) for i in range(n)], max_new, N, temp)
    ans = np.full((n, N), -1, np.int8)
    trace = np.zeros((n, N, T), np.uint8)
    for i in range(n):
        for j in range(N):
            a, tr, ok = parse(comps[i][j], T)
            ans[i, j], trace[i, j] = (a if ok else -1), tr
    rng = stream(seed, "self_prior_majority", name)
    majority = np.full(n, -1, np.int8)
    for i in range(n):
        valid = ans[i][ans[i] >= 0]
        if valid.size:
            counts = np.bincount(valid, minlength=N_OPT)
            majority[i] = int(rng.choice(np.flatnonzero(counts == counts.max())))
    absent = np.array([int(not (ans[i] == d["y"][i]).any()) for i in range(n)], np.uint8)
    out = {**d, "prior_ans": ans, "prior_trace": trace, "majority": majority, "absent": absent}
    stats = {"unparsed": float((ans < 0).mean()), "prior_acc": float((ans == d["y"][:, None]).mean()),
             "majority_right": float((majority == d["y"]).mean()), "absent": float(absent.mean())}
    return out, stats


def sample_text(model: Any, tok: Any, prompts: list[str], max_new: int, n: int, temperature: float) -> list[list[str]]:
    """n sampled completions per prompt (the text path's self priors)."""
    import torch

    model.eval()
    out: list[list[str]] = []
    tok.padding_side = "left"
    with torch.no_grad():
        for i in range(0, len(prompts), 32):
            enc = tok(prompts[i:i + 32], return_tensors="pt", padding=True)
            enc.pop("token_type_ids", None)
            gen = model.generate(**enc.to(model.device), max_new_tokens=max_new, do_sample=True, temperature=temperature,
                                 top_k=0, num_return_sequences=n, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id)
            texts = tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            out += [texts[k * n:(k + 1) * n] for k in range(len(texts) // n)]
    return out


def run_arms_trl(arms: list[str], p: Mapping[str, Any], splits: Mapping[str, Mapping[str, np.ndarray]], seed: int,
                 workdir: Path, steps: int | None = None, *, resumable: bool = False,
                 stop_after: int | None = None) -> dict[str, Any] | None:
    """Train (TRL) and evaluate each arm on the test split with one greedy integration pass.

    `resumable`: `workdir` is the job's stamped checkpoint folder — a finished arm's result is kept there
    (`core.checkpoint.keep_unit`) and reused by a rerun, a running arm's Trainer checkpoints every
    `trl_save_steps` steps into `workdir/<arm>` and resumes. `stop_after` (tests: a simulated kill) stops the
    first arm that trains after that many steps and returns None."""
    import time

    from paperflow.core.checkpoint import finished_unit, keep_unit
    from paperflow.video_bci.train import majority_vote, metrics

    priors: dict[str, float] | None = None
    if p.get("prior_source") == "self":  # the policy's own priors, sampled once from the initial policy
        splits, priors = dict(splits), {}
        T0 = splits["train"]["frames"].shape[1]
        model, tok = (load_vlm_policy if p.get("trl_vlm") else load_policy)(p, T0, seed)
        for name in ("train", "test"):
            splits[name], st = self_priors(model, tok, splits[name], p, seed, Path(workdir), name)
            priors.update({f"{name}_{k}": v for k, v in st.items()})
    test = splits["test"]
    T = test["frames"].shape[1]
    out: dict[str, Any] = {}
    for arm in arms:
        if arm == "majority":
            a, tr = majority_vote(test)
            out[arm] = {**metrics(a, tr, test), "curve": [], "updates_to_90": 0, "train_seconds": 0.0}
            continue
        kept = finished_unit(workdir, arm) if resumable else None
        if kept is not None:
            out[arm] = kept
            continue
        t0 = time.perf_counter()
        model, tok, log = train_arm_trl(arm, splits["train"], p, seed, workdir, steps,
                                        int(p.get("trl_save_steps") or 0) if resumable else 0, stop_after)
        if log is None:
            return None
        secs = time.perf_counter() - t0
        if p.get("trl_vlm"):
            from paperflow.nn.trl_vlm import generate_answers

            test_rows = vlm_rows(test, np.arange(len(test["y"])), arm != "direct", workdir / f"{arm}.test.parquet")
            comps = generate_answers(model, tok, test_rows, int(p["trl_max_completion_length"]))
        else:
            comps = generate(model, tok, [render(test, i, arm != "direct") for i in range(len(test["y"]))],
                             int(p["trl_max_completion_length"]))
        parsed = [parse(c, T) for c in comps]
        a = np.array([x for x, _, _ in parsed])
        tr = np.stack([t for _, t, _ in parsed])
        out[arm] = {**metrics(a, tr, test), "curve": [], "updates_to_90": -1, "train_seconds": secs,
                    "update_seconds": secs / max(1, len(log)), "format_rate": float(np.mean([ok for *_, ok in parsed])),
                    "trl_log": log}
        if priors is not None:
            out[arm]["self_priors"] = priors
        if resumable:
            keep_unit(workdir, arm, out[arm])
    return out
