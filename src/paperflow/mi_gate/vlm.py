"""The VLM path of mi_gate (`model.kind: vlm`): self-captions and LoRA SFT of a VLM, as the authors' SFT code does.

The recipe (spec §9, from the repo's SFT/config.yaml): the gate's chosen training samples get the VLM's own
caption of their image appended to their text (≤ 96 new tokens), then the VLM is fine-tuned with LoRA (r 16,
α 32, dropout 0.05 on the q, k, v, o, gate, up and down projections), 3 epochs, lr 1e-5, cosine schedule with
3 % warm-up, effective batch 8, and evaluated by generation accuracy. Here:

- the VLM is `vlm.path` (SmolVLM2-2.2B-Instruct at paper scale, through `AutoModelForImageTextToText` +
  `AutoProcessor`) or, when null, a random tiny LLaVA with a word-level processor (`nn.trl_vlm`), so the same
  code runs in CI on CPU;
- SFT is TRL's `SFTTrainer` with a `peft.LoraConfig` on prompt–completion rows (loss on the answer only):
  user = [image, text + question], assistant = "Yes." / "No.";
- images: with `data.files.image_dir` the real images (`<image_dir>/<id>.png`, the authors' layout), resized
  to `image_size`, corrupted on their pixels (noise k× pixel RMS, pixel dropout, bottom half occluded); else
  the tiny world's feature vector drawn as grey blocks (`nn.trl_vlm.vector_image`), corrupted as a vector.
  Either way T1's self-caption is made from the corrupted image, as the spec asks;
- predictions: the first "Yes."/"No." word of the greedy answer; anything else counts as a third class
  (wrong), so a model that does not answer is not scored at chance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.mi_gate.data import COLOURS, CUES, LABELS, SHAPES, TEMPLATES, Dataset

IMAGE_SCALE = 40.0  # grey level per feature unit in the drawn images
UNPARSED = 2  # prediction of an answer that is neither "Yes." nor "No."


def images_of(features: np.ndarray) -> list[Any]:
    """The tiny world's image vectors drawn as grey blocks (`nn.trl_vlm.vector_image`)."""
    from PIL import Image

    from paperflow.nn.trl_vlm import vector_image

    return [Image.fromarray(vector_image(x, IMAGE_SCALE)) for x in features]


def read_images(ids: Sequence[int], image_dir: str | Path, size: int) -> np.ndarray:
    """Real images in the authors' layout (`<image_dir>/<id>.png`), RGB, resized to size × size, as
    pixel vectors in [−1, 1] (N, size·size·3): the form `data.corrupt_image` corrupts."""
    from PIL import Image

    out = np.empty((len(ids), size * size * 3), np.float32)
    for k, i in enumerate(ids):
        path = Path(image_dir) / f"{int(i)}.png"
        if not path.exists():
            raise FileNotFoundError(f"mi_gate vlm: no image {path} for record id {int(i)} (data.files.image_dir)")
        im = Image.open(path).convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
        out[k] = np.asarray(im, np.float32).reshape(-1) / 127.5 - 1.0
    return out


def pixels_to_images(x: np.ndarray, size: int) -> list[Any]:
    """Pixel vectors in [−1, 1] (possibly corrupted: 0 = mid-grey) back to PIL images."""
    from PIL import Image

    arr = np.clip(np.rint((x + 1.0) * 127.5), 0, 255).astype(np.uint8).reshape(len(x), size, size, 3)
    return [Image.fromarray(a) for a in arr]


def split_images(d: Dataset, v: Mapping[str, Any]) -> tuple[np.ndarray, Any]:
    """(vectors the corruptions act on, vectors → PIL images): the real images when `image_dir` is set (pixel
    corruptions: noise, dropout and occlusion of the bottom half act on pixels), else the feature vectors."""
    if v.get("image_dir"):
        size = int(v["image_size"])
        return read_images(d.ids, v["image_dir"], size), lambda x: pixels_to_images(x, size)
    return d.image, images_of


def word_vocab(random_words: Sequence[str], question: str, caption_prompt: str) -> list[str]:
    """Every word the tiny world's texts, captions, prompts and answers use (the word-level processor's vocab)."""
    words: list[str] = []
    for ts in TEMPLATES.values():
        for t in ts:
            words += t.replace("{colour}", COLOURS[0]).replace("{cue}", CUES[0]).split()
    words += list(COLOURS) + list(SHAPES) + list(CUES) + list(LABELS) + list(random_words)
    words += question.split() + caption_prompt.split() + ["a", "an", "the"]
    return list(dict.fromkeys(words))


def load(v: Mapping[str, Any], random_words: Sequence[str], seed: int) -> tuple[Any, Any]:
    """(model, processor): `v['path']` as a VLM, or a random tiny LLaVA over the tiny world's words."""
    from paperflow.nn import trl_vlm

    if v.get("path"):
        return trl_vlm.load_vlm(v["path"])
    proc = trl_vlm.word_processor(word_vocab(random_words, v["question"], v["caption_prompt"]))
    return trl_vlm.tiny_llava(proc, hidden=int(v["tiny_hidden"]), layers=int(v["tiny_layers"]), seed=seed), proc


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


def self_captions(model: Any, proc: Any, images: Sequence[Any], prompt: str, max_new_tokens: int) -> list[str]:
    """The VLM's own caption of each image (greedy, ≤ max_new_tokens)."""
    from paperflow.nn.trl_vlm import generate_answers

    rows = {"prompt": [_user(prompt)] * len(images), "images": [[im] for im in images]}
    return [c.strip() for c in generate_answers(model, proc, rows, max_new_tokens)]


def sft_rows(images: Sequence[Any], texts: Sequence[str], y: np.ndarray, question: str) -> dict[str, list[Any]]:
    """TRL prompt–completion rows: user = [image, text + question], assistant = the label word."""
    return {"prompt": [_user(f"{t} {question}".strip()) for t in texts],
            "completion": [[{"role": "assistant", "content": [{"type": "text", "text": LABELS[int(k)]}]}] for k in y],
            "images": [[im] for im in images]}


def lora_sft(model: Any, proc: Any, rows: Mapping[str, list[Any]], v: Mapping[str, Any], seed: int,
             output_dir: str | Path) -> tuple[Any, list[dict[str, float]]]:
    """LoRA SFT with TRL's SFTTrainer; returns (the PEFT-wrapped model, TRL's per-step log)."""
    import torch
    from datasets import Dataset as HFDataset
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    from paperflow.nn.trl_grpo import reset_accelerate_state

    lo, s = v["lora"], v["sft"]
    cuda = torch.cuda.is_available()
    args = SFTConfig(output_dir=str(output_dir), num_train_epochs=float(s["epochs"]), learning_rate=float(s["lr"]),
                     lr_scheduler_type="cosine", warmup_steps=float(s["warmup_ratio"]),
                     per_device_train_batch_size=int(s["batch_size"]), seed=seed, use_cpu=not cuda, bf16=cuda,
                     report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True, max_length=None)
    peft_cfg = LoraConfig(r=int(lo["r"]), lora_alpha=int(lo["alpha"]), lora_dropout=float(lo["dropout"]),
                          target_modules=list(lo["target_modules"]), task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=model, args=args, train_dataset=HFDataset.from_dict(dict(rows)), processing_class=proc,
                         peft_config=peft_cfg)
    try:
        trainer.train()
    finally:
        reset_accelerate_state()
    return trainer.model, [dict(h) for h in trainer.state.log_history if "loss" in h]


def parse_label(answer: str) -> int:
    """The first word that is yes/no (case and punctuation ignored: "Yes.", "yes", "NO!") → 1/0, else UNPARSED."""
    names = [lab.strip(".").lower() for lab in LABELS]
    for w in answer.split():
        w = w.strip(".,!?;:\"'").lower()
        if w in names:
            return names.index(w)
    return UNPARSED


def predict(model: Any, proc: Any, images: Sequence[Any], texts: Sequence[str], question: str,
            max_new_tokens: int = 3) -> np.ndarray:
    from paperflow.nn.trl_vlm import generate_answers

    rows = {"prompt": [_user(f"{t} {question}".strip()) for t in texts], "images": [[im] for im in images]}
    return np.array([parse_label(a) for a in generate_answers(model, proc, rows, max_new_tokens)], np.int64)


def run_seed_vlm(arm: str, tau: float | None, seed: int, ds: Mapping[str, Dataset], gate: Mapping[str, Any],
                 p: Mapping[str, Any], workdir: str | Path) -> dict[str, Any]:
    """One arm × τ × seed on the VLM: training text (the gate's choice, captions = the VLM's own), LoRA SFT,
    generation accuracy / VIE / consistency under T0 and T1 for every test condition."""
    from paperflow.core.seeding import stream
    from paperflow.mi_gate.data import corrupt_image, drop_words
    from paperflow.mi_gate.evaluate import condition_metrics
    from paperflow.mi_gate.train import TEXT_VARIANTS, training_text

    v, ev = p["vlm"], p["eval"]
    tr, va, te = ds["train"], ds["val"], ds["test"]
    model, proc = load(v, p["random_words"], seed)
    tr_vec, draw = split_images(tr, v)
    tr_images = draw(tr_vec)
    caps = dict(zip(gate["ids"], gate["captions"]))
    if arm in ("gated", "random"):  # the VLM's own captions of the images it will be trained on
        _, idx = training_text(arm, tau, seed, tr, gate, p["random_words"])
        own = self_captions(model, proc, [tr_images[k] for k in idx], v["caption_prompt"], int(v["max_caption_tokens"]))
        caps = {**caps, **{int(tr.ids[k]): c for k, c in zip(idx, own)}}
    texts, idx = training_text(arm, tau, seed, tr, {**gate, "captions": [caps[int(i)] for i in gate["ids"]]},
                               p["random_words"])
    model, log = lora_sft(model, proc, sft_rows(tr_images, texts, tr.y, v["question"]), v, seed, Path(workdir) / "sft")
    res: dict[str, Any] = {"seed": seed, "n_augmented": int(len(idx)), "sft_log": log,
                           "final_loss": log[-1]["loss"] if log else float("nan")}
    va_vec, _ = split_images(va, v)
    res["val_acc"] = float(np.mean(predict(model, proc, draw(va_vec), va.text, v["question"]) == va.y))
    te_vec, _ = split_images(te, v)
    preds: dict[tuple[str, str], np.ndarray] = {}
    for cond in ev["conditions"]:
        rng = stream(int(ev["seed"]), cond)
        img = corrupt_image(te_vec, cond, rng, float(ev["dropout"]))
        text = drop_words(te.text, float(ev["word_drop"]), rng) if cond == "worddrop" else list(te.text)
        ims = draw(img)
        own = self_captions(model, proc, ims, v["caption_prompt"], int(v["max_caption_tokens"]))
        preds[("T0", cond)] = predict(model, proc, ims, text, v["question"])
        preds[("T1", cond)] = predict(model, proc, ims, [f"{t} {c}".strip() for t, c in zip(text, own)], v["question"])
    res["test"] = {tv: {cond: condition_metrics(preds[(tv, "clean")], preds[(tv, cond)], te.y, te.types)
                        for cond in ev["conditions"]} for tv in TEXT_VARIANTS}
    return res
