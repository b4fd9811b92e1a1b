"""rl.backend = trl: the same arms, stages, data and reward mapped onto TRL's GRPOTrainer (`paperflow.nn.trl_grpo`).

What maps one-to-one: the arm's stage list and budget split (`train.stage_updates`; TRL steps =
round(steps_scale × updates)), the stage's data set (the base's filtered D_perc, the unfiltered D_perc, D_text,
D_vis, merged = the three mixed in the split's proportions), G, the clip ε, the KL β, and the reward
(1[answer correct] − look_cost · `<look>` count, parsed from the completion's words by the same grammar).

What differs: a text causal LM has no continuous input, so at test scale (tiny_llama, `trl.model_path` null) the
image reaches it as one *visual word* per slot, `v_<colour>` / `v_none`, the prototype nearest to the noisy slot
vector (a lossy percept; a caption is the exact colour words). A `<look>` is a no-op that still costs (no fresh
scene copy mid-generation in TRL). Caption-SFT (a supervised stage) is not a GRPO stage: with this backend it is
skipped and recorded as such. `trl.model_path` loads a text causal LM through `from_pretrained`.

`trl.vlm: true` is the image path (`paperflow.nn.trl_vlm`): each GRPO stage's items are written as an EasyR1-layout
parquet file (`problem` with `<image>` where the scene goes, `answer`, `images`) and read back by the loader a
released EasyR1 dataset goes through; `trl.data_files` names such released files per stage kind instead. The
scene is rendered as pixels (`slot_image`: each slot's noisy feature vector as grey blocks, so the VLM sees the
same percept the tiny policy does); the reward is EasyR1's boxed math score; the model is
`trl.model_path` loaded as a VLM (`AutoModelForImageTextToText` + `AutoProcessor`, e.g. Qwen2.5-VL-7B) or, when
null, a random tiny LLaVA with a word-level processor (tests). Image and text-only items (D_text) are never in
one TRL batch (`trl_vlm.modality_blocks`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.seeding import stream
from paperflow.staged_rl.data import COLOURS, DESCRIBE, IMAGE, PERC, TEXT, VIS, load_split, load_world, subset
from paperflow.staged_rl.model import MAX_NUM, prompt_words

SPECIAL = ["<see>", "</see>", "<ans>", "<look>"]
TRL_VOCAB = ([str(i) for i in range(MAX_NUM + 1)] + list(COLOURS) + ["none"] + [f"v_{c}" for c in COLOURS]
             + ["v_none", "+", "?", "how_many", "opts", "describe"] + SPECIAL)


def visual_words(feats: np.ndarray, protos: np.ndarray) -> list[str]:
    """Nearest prototype per slot (row 4 of `protos` = empty) → `v_<colour>` / `v_none`."""
    d = ((feats[:, None, :] - protos[None]) ** 2).sum(-1)
    names = list(COLOURS) + ["none"]
    return [f"v_{names[int(k)]}" for k in d.argmin(1)]


def rows_of(d: Mapping[str, np.ndarray], protos: np.ndarray) -> dict[str, list[Any]]:
    """TRL dataset columns: prompt (words), task, answer."""
    prompts, tasks, answers = [], [], []
    for i in range(len(d["task"])):
        task, pre = int(d["task"][i]), int(d["prefix"][i])
        words = prompt_words(task, pre, d["colours"][i], d["q"][i], d["options"][i])
        if pre == IMAGE:
            n = d["feats"].shape[1]
            words = visual_words(d["feats"][i], protos) + words[n:]
        prompts.append(" ".join(words))
        tasks.append(task)
        answers.append(int(d["answer"][i]))
    return {"prompt": prompts, "task": tasks, "answer": answers}


def parse_words(text: str) -> tuple[int | None, int]:
    """(answer or None, `<look>` count) of `[<look>]* [<see> n.. </see>] <ans> k [<eos>]` in a completion."""
    w = text.split()
    looks = 0
    while w and w[0] == "<look>":
        w.pop(0)
        looks += 1
    if w and w[0] == "<see>" and "</see>" in w:
        w = w[w.index("</see>") + 1:]
    w = [x for x in w if x not in ("<eos>", "<pad>")]
    if len(w) == 2 and w[0] == "<ans>" and w[1].isdigit():
        return int(w[1]), looks
    return None, looks


def make_reward(look_cost: float):  # noqa: ANN201  (TRL's reward signature)
    def staged_reward(completions: list[str], answer: list[int], **_: Any) -> list[float]:
        out = []
        for c, a in zip(completions, answer):
            got, looks = parse_words(c if isinstance(c, str) else str(c))
            out.append(float(got == int(a)) - look_cost * looks)
        return out

    return staged_reward


def stage_rows(kind: str, data: Path, filt: Mapping[str, Any], p: Mapping[str, Any], seed: int,
               protos: np.ndarray) -> dict[str, list[Any]]:
    return rows_of(stage_split(kind, data, filt, p, seed), protos)


def load_model(p: Mapping[str, Any], seed: int) -> tuple[Any, Any]:
    from paperflow.nn.trl_grpo import tiny_llama, word_tokenizer

    t = p["trl"]
    if t["model_path"]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return AutoModelForCausalLM.from_pretrained(t["model_path"]), AutoTokenizer.from_pretrained(t["model_path"])
    tok = word_tokenizer(TRL_VOCAB)
    return tiny_llama(len(tok), hidden=int(t["hidden"]), layers=int(t["layers"]), seed=seed), tok


def reload_from(model: Any, path: Path) -> Any:
    """Save the model and load it back from `path`, so `config._name_or_path` names these weights."""
    model.save_pretrained(path)
    return type(model).from_pretrained(path)


def evaluate_trl(model: Any, tok: Any, data: Path, protos: np.ndarray, p: Mapping[str, Any]) -> dict[str, Any]:
    """Greedy accuracy on the first trl.n_test items of each test set."""
    import torch

    out = {}
    for name in ("perc", "text", "vis"):
        rows = rows_of(subset(load_split(data, f"test_{name}"), np.arange(int(p["trl"]["n_test"]))), protos)
        correct, tokens, looks = [], [], []
        for prompt, a in zip(rows["prompt"], rows["answer"]):
            ids = tok(prompt, return_tensors="pt").to(model.device)
            with torch.no_grad():
                g = model.generate(**ids, max_new_tokens=int(p["trl"]["max_completion_length"]), do_sample=False,
                                   pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
            comp = g[0, ids["input_ids"].shape[1]:]
            got, n_look = parse_words(tok.decode(comp, skip_special_tokens=False))
            correct.append(int(got == a))
            tokens.append(int(comp.numel()))
            looks.append(n_look)
        out[name] = {"acc": float(np.mean(correct)), "tokens": float(np.mean(tokens)),
                     "look_rate": float(np.mean(looks)), "correct": correct}
    return out


def run_arm_trl(arm: str, data: Path, filt: Mapping[str, Any], p: Mapping[str, Any], seed: int,
                workdir: Path | None = None, ckpt: Path | None = None,
                stop_after: int | None = None) -> dict[str, Any] | None:
    """One arm through TRL: each GRPO stage continues the same model; evaluation after every stage.

    With `ckpt` (the arm's folder in the job's stamped checkpoint folder) the arm is resumable: a finished
    stage keeps its weights and record, a running stage TRL checkpoints every `trl.save_steps` steps, and a
    rerun skips the finished stages and resumes the running one. `stop_after` (tests: a simulated kill)
    stops the arm after that many TRL steps in total and returns None."""
    if p["trl"].get("vlm"):
        return run_arm_vlm(arm, data, filt, p, seed, workdir, ckpt, stop_after)
    protos = load_world(data)["protos"]
    model, tok = load_model(p, seed)
    r = _run_stages(arm, model, tok, p, seed,
                    rows_for=lambda kind, _files: stage_rows(kind, data, filt, p, seed, protos),
                    reward=make_reward(float(p["look_cost"])),
                    evaluate=lambda m, _files: evaluate_trl(m, tok, data, protos, p),
                    workdir=workdir, ckpt=ckpt, stop_after=stop_after)
    return None if r is None else r | {"backend": "trl"}


def set_vision_frozen(model: Any, frozen: bool) -> int:
    """(Un)freeze a VLM's vision encoder (`vision_tower` in LLaVA, `visual` in Qwen-VL), as EasyR1's
    `freeze_vision_tower` does for the text stage; returns how many tensors were frozen (0: no encoder)."""
    inner = getattr(model, "model", model)
    tower = getattr(inner, "vision_tower", None) or getattr(inner, "visual", None) \
        or getattr(model, "vision_tower", None) or getattr(model, "visual", None)
    if tower is None:
        return 0
    n = 0
    for prm in tower.parameters():
        prm.requires_grad_(not frozen)
        n += 1
    return n if frozen else 0


def _run_stages(arm: str, model: Any, proc: Any, p: Mapping[str, Any], seed: int, *, rows_for, reward, evaluate,
                workdir: Path | None, ckpt: Path | None, stop_after: int | None) -> dict[str, Any] | None:
    """The stage loop both TRL paths share (text LM and VLM); resumable with `ckpt` (see run_arm_trl).

    With `ckpt`, every finished stage writes `<i>_<kind>/done.json` (its record; skipped stages too) and a
    trained stage its weights `<i>_<kind>/model`; only the newest weights are kept (a 7B model per stage would
    otherwise pile up), and a rerun replays the finished records and loads those weights once."""
    from paperflow.core.io import read_json, write_json
    from paperflow.nn.trl_grpo import GRPOSettings, train
    from paperflow.staged_rl.train import stage_updates

    t = p["trl"]
    stages: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    plan = [] if arm == "base" else stage_updates(arm, [int(x) for x in p["split"]])
    steps_left = stop_after
    saved: list[Path] = []  # stage weights on disk, oldest first
    if ckpt is not None:
        for i, (kind, _) in enumerate(plan):
            d = ckpt / f"{i}_{kind}"
            if not (d / "done.json").exists():
                break
            stages.append(read_json(d / "done.json"))
            if (d / "model").is_dir():
                saved.append(d / "model")
        if saved:
            model = type(model).from_pretrained(saved[-1])
    first = len(stages)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        files = Path(tmp)
        if arm == "base":
            stages.append({"stage": "base", "updates": 0, "history": [], "eval": evaluate(model, files)})
        for i, (kind, upd) in enumerate(plan[first:], first):
            sdir = (ckpt if ckpt is not None else files) / f"{i}_{kind}"
            rows = None if kind == "capsft" else rows_for(kind, files)
            if rows is None or not rows["prompt"]:  # caption-SFT; or, as grpo_lite, an empty D_perc: skipped
                why = "supervised stage: not a GRPO stage" if rows is None else "no items (the filter kept none)"
                rec = {"stage": kind, "updates": 0, "history": [], "skipped": why, "eval": evaluate(model, files)}
                stages.append(rec)
                if ckpt is not None:
                    write_json(sdir / "done.json", rec)
                continue
            steps = max(1, round(float(t["steps_scale"]) * upd))
            s = GRPOSettings(num_generations=int(p["group_size"]), prompts_per_step=int(p["prompts_per_update"]),
                             max_completion_length=int(t["max_completion_length"]), max_steps=steps,
                             learning_rate=float(t["learning_rate"]), beta=float(p["kl_beta"]),
                             epsilon=float(p["clip_eps"]), seed=seed,
                             shuffle="images" not in rows or all(rows["images"]) or not any(rows["images"]),
                             save_steps=int(t.get("save_steps") or 0) if ckpt is not None else 0)
            if s.beta > 0:  # TRL builds its reference model from the policy's path: the stage's initial weights
                model = reload_from(model, sdir / "init")
            frozen = set_vision_frozen(model, kind in (t.get("freeze_vision_stages") or []))
            t1 = time.perf_counter()
            hist = train(model, proc, rows, [reward], s, sdir / "trl",
                         stop_after=steps_left if steps_left is not None and steps_left < steps else None)
            set_vision_frozen(model, False)
            if hist is None:
                return None  # a simulated kill
            if steps_left is not None:
                steps_left -= steps
            rec = {"stage": kind, "updates": steps, "history": hist,
                   "seconds_per_step": (time.perf_counter() - t1) / steps, "eval": evaluate(model, files)}
            if frozen:
                rec["vision_frozen"] = frozen
            if "images" in rows:
                rec.update(n_items=len(rows["prompt"]), n_image_items=sum(bool(x) for x in rows["images"]))
            stages.append(rec)
            if ckpt is not None:
                model.save_pretrained(sdir / "model")
                write_json(sdir / "done.json", rec)
                for old in saved:  # the new weights are on disk: the older ones are no longer needed
                    shutil.rmtree(old, ignore_errors=True)
                saved = [sdir / "model"]
            shutil.rmtree(sdir / "trl", ignore_errors=True)
            shutil.rmtree(sdir / "init", ignore_errors=True)
    return {"stages": stages, "seconds": time.perf_counter() - t0}


# --- trl.vlm: the image path --------------------------------------------------------------------------------

VLM_BLOCK = 4  # pixels per feature value in `slot_image`


def slot_image(feats: np.ndarray, block: int = VLM_BLOCK) -> np.ndarray:
    """uint8 [S, S, 3]: slots side by side, each a column of its feature values as grey blocks
    (value v → clip(128 + 40·v)), on a square mid-grey (v = 0) canvas."""
    n_slots, dim = feats.shape
    grey = np.clip(np.rint(128 + 40 * np.asarray(feats, np.float64)), 0, 255).astype(np.uint8)  # [n_slots, dim]
    tile = np.repeat(np.repeat(grey.T, block, axis=0), block, axis=1)  # [dim·b, n_slots·b]
    side = max(tile.shape)
    canvas = np.full((side, side), 128, np.uint8)
    canvas[: tile.shape[0], : tile.shape[1]] = tile
    return np.repeat(canvas[:, :, None], 3, axis=2)


def vlm_items(d: Mapping[str, np.ndarray]) -> tuple[list[str], list[str], list[list[np.ndarray]]]:
    """(problems, answers, images) of a split: an image item's slot words become one `<image>`."""
    from paperflow.nn.trl_vlm import IMAGE_PLACEHOLDER

    problems, answers, images = [], [], []
    for i in range(len(d["task"])):
        task, pre = int(d["task"][i]), int(d["prefix"][i])
        words = prompt_words(task, pre, d["colours"][i], d["q"][i], d["options"][i])
        ims: list[np.ndarray] = []
        if pre == IMAGE:
            n = d["feats"].shape[1]
            words = [IMAGE_PLACEHOLDER] + words[n:]
            ims = [slot_image(d["feats"][i])]
        problems.append(" ".join(words))
        answers.append(str(int(d["answer"][i])))
        images.append(ims)
    return problems, answers, images


def merged_picks(sizes: Sequence[int], p: Mapping[str, Any], seed: int) -> list[tuple[int, int]]:
    """The merged arm's mix of the P, T, V sets (`sizes` items each): as many draws as items in all three, each
    (set, item) with the set drawn in the split's proportions and the item uniformly; empty sets are skipped."""
    w = np.asarray(p["split"], float)
    rng = stream(seed, "trl_merged")
    which = rng.choice(3, size=int(sum(sizes)), p=w / w.sum())
    return [(int(k), int(rng.integers(sizes[k]))) for k in which if sizes[k]]


def stage_split(kind: str, data: Path, filt: Mapping[str, Any], p: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
    """The stage's items as one split dict (merged: the three sets mixed in the split's proportions)."""
    pool = load_split(data, "perc_pool")
    if kind == "perc":
        return subset(pool, np.asarray(filt["keep"], np.int64))
    if kind == "perc_unf":
        idx = stream(seed, "unfiltered").choice(len(pool["task"]), size=max(len(filt["keep"]), 1), replace=False)
        return subset(pool, idx)
    if kind in ("text", "vis"):
        return load_split(data, f"{kind}_rl")
    if kind == "merged":
        parts = [stage_split(k, data, filt, p, seed) for k in ("perc", "text", "vis")]
        picks = merged_picks([len(x["task"]) for x in parts], p, seed)
        if not picks:
            return subset(parts[0], np.arange(0))
        return {c: np.stack([parts[k][c][j] for k, j in picks]) for c in parts[0]}
    raise ValueError(f"stage kind {kind!r} has no GRPO data")


def vlm_stage_rows(kind: str, data: Path, filt: Mapping[str, Any], p: Mapping[str, Any], seed: int,
                   workdir: Path) -> dict[str, list[Any]]:
    """Write the stage's EasyR1 parquet (or take `trl.data_files[kind]`) and read it back as TRL columns."""
    from paperflow.nn.trl_vlm import modality_blocks, read_easyr1, write_easyr1

    t = p["trl"]
    files = dict(t.get("data_files") or {})
    if files and kind == "merged" and "merged" not in files:  # the released P, T, V sets mixed like stage_split
        parts = [vlm_stage_rows(k, data, filt, p, seed, workdir) for k in ("perc", "text", "vis")]
        picks = merged_picks([len(x["prompt"]) for x in parts], p, seed)
        rows = {c: [parts[k][c][j] for k, j in picks] for c in parts[0]}
    elif files:
        if kind not in files:  # never fall back to generated tiny data next to released data
            raise ValueError(f"staged_rl trl.data_files has no {kind!r} file (has: {sorted(files)})")
        rows = read_easyr1(files[kind], format_prompt=t.get("format_prompt"))
    else:
        split = stage_split(kind, data, filt, p, seed)
        if len(split["task"]) == 0:  # the filter kept nothing: no file (parquet cannot hold zero rows here)
            return {"prompt": [], "images": [], "answer": []}
        path = write_easyr1(workdir / f"{kind}.parquet", *vlm_items(split))
        rows = read_easyr1(path, format_prompt=t.get("format_prompt"))
    if any(rows["images"]) and not all(rows["images"]):
        rows = modality_blocks(rows, int(p["prompts_per_update"]), stream(seed, "trl_blocks", kind))
    return rows


def parse_int_answer(text: str) -> int | None:
    """A filter answer: the content of the last `\\boxed{}` if any, else the first integer word; None if neither."""
    from paperflow.nn.trl_vlm import extract_boxed

    boxed = extract_boxed(text)
    for w in (boxed.split() if boxed is not None else text.split()):
        w = w.strip(".,:;()")
        if w.isdigit():
            return int(w)
    return None


def vlm_perception_filter(models: Sequence[tuple[Any, Any]], pool: Mapping[str, np.ndarray],
                          max_new_tokens: int = 8) -> dict[str, Any]:
    """The repo's perception filter with VLMs as the filter models (`data_pipeline/filter_perception.py`, spec §6):
    keep an MCQ iff, for **every** model, the greedy answer (≤ 8 new tokens) from the image is parseable and wrong
    and the greedy answer from the caption is right (`train.filter_keep` per model, intersected)."""
    from paperflow.nn.trl_vlm import generate_answers, problem_to_messages
    from paperflow.staged_rl.data import CAPTION
    from paperflow.staged_rl.train import filter_keep

    gold = [int(a) for a in pool["answer"]]
    keep: set[int] | None = None
    stats = []
    for model, proc in models:
        answers = {}
        for name, prefix in (("img", IMAGE), ("cap", CAPTION)):
            d = {**pool, "prefix": np.full(len(gold), prefix, pool["prefix"].dtype)}
            problems, _, images = vlm_items(d)
            rows = {"prompt": [problem_to_messages(q, ims) for q, ims in zip(problems, images)], "images": images}
            answers[name] = [parse_int_answer(a) for a in generate_answers(model, proc, rows, max_new_tokens)]
        k = set(filter_keep(answers["img"], answers["cap"], gold))
        keep = k if keep is None else keep & k
        stats.append({"img_acc": float(np.mean([a == g for a, g in zip(answers["img"], gold)])),
                      "cap_acc": float(np.mean([c == g for c, g in zip(answers["cap"], gold)])),
                      "img_unparseable": float(np.mean([a is None for a in answers["img"]])), "kept": len(k)})
    return {"keep": sorted(keep or []), "n_pool": len(gold), "per_model": stats}


def load_vlm_model(p: Mapping[str, Any], seed: int) -> tuple[Any, Any]:
    from paperflow.nn import trl_vlm

    t = p["trl"]
    if t["model_path"]:
        return trl_vlm.load_vlm(t["model_path"])
    proc = trl_vlm.word_processor(TRL_VOCAB)
    return trl_vlm.tiny_llava(proc, hidden=int(t["hidden"]), layers=int(t["layers"]), seed=seed), proc


def evaluate_vlm(model: Any, proc: Any, data: Path, p: Mapping[str, Any], workdir: Path) -> dict[str, Any]:
    """Greedy boxed-answer accuracy on the first trl.n_test items of each test set (through the same files)."""
    from paperflow.nn.trl_vlm import accuracy_score, generate_answers, read_easyr1, write_easyr1

    t = p["trl"]
    out = {}
    for name in ("perc", "text", "vis"):
        split = subset(load_split(data, f"test_{name}"), np.arange(int(t["n_test"])))
        path = write_easyr1(workdir / f"test_{name}.parquet", *vlm_items(split))
        rows = read_easyr1(path, format_prompt=t.get("format_prompt"))
        answers = generate_answers(model, proc, rows, int(t["max_completion_length"]))
        correct = [int(accuracy_score(a, g)) for a, g in zip(answers, rows["answer"])]
        out[name] = {"acc": float(np.mean(correct)), "tokens": float(np.mean([len(a.split()) for a in answers])),
                     "look_rate": float(np.mean([a.split().count("<look>") for a in answers])), "correct": correct}
    return out


def run_arm_vlm(arm: str, data: Path, filt: Mapping[str, Any], p: Mapping[str, Any], seed: int,
                workdir: Path | None = None, ckpt: Path | None = None,
                stop_after: int | None = None) -> dict[str, Any] | None:
    """One arm through TRL on a VLM: the stage files are EasyR1 parquet, the reward EasyR1's boxed score."""
    from paperflow.nn.trl_vlm import make_boxed_reward

    model, proc = load_vlm_model(p, seed)
    r = _run_stages(arm, model, proc, p, seed,
                    rows_for=lambda kind, files: vlm_stage_rows(kind, data, filt, p, seed, files),
                    reward=make_boxed_reward(float(p["trl"].get("format_weight", 0.1))),
                    evaluate=lambda m, files: evaluate_vlm(m, proc, data, p, files),
                    workdir=workdir, ckpt=ckpt, stop_after=stop_after)
    return None if r is None else r | {"backend": "trl", "model": "vlm"}

__all__ = ["DESCRIBE", "PERC", "TEXT", "TRL_VOCAB", "VIS", "make_reward", "parse_words", "rows_of", "run_arm_trl",
           "run_arm_vlm", "slot_image", "vlm_items"]
