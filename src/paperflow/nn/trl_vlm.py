"""The VLM image path of the paper-scale RL studies: EasyR1-format data, a VLM + processor, TRL GRPO on images.

The papers behind `staged_rl` and `video_bci` train Qwen2.5-VL with GRPO on image (or frame) prompts
(EasyR1 / Video-R1). Users run that with TRL: `GRPOTrainer` takes a `ProcessorMixin` as its processing
class and conversational prompts whose content holds `{"type": "image"}` parts, with the images in an
`images` column. This module is the one place that builds those inputs:

- **Data** in EasyR1's layout (its `examples/config.yaml`: `prompt_key: problem`, `answer_key: answer`,
  `image_key: images`): a parquet file per split with `problem` (text with one `<image>` placeholder per
  image, in order), `answer` (string) and `images` (a list of images, stored by `datasets` as PNG bytes).
  `write_easyr1` writes it, `read_easyr1` reads it back (ours or a released dataset in that layout) and
  checks every row's placeholder count against its images, naming file and row on a mismatch.
- **Reward** as EasyR1's math score function computes it: accuracy of the last `\\boxed{...}` against the
  answer, plus a format term (`<think>…</think>` then `\\boxed{…}`), `(1 − w)·acc + w·format`, w = 0.1.
  The answer comparison is exact after whitespace/`$` stripping and integer/float normalisation, a subset
  of the `mathruler` grader EasyR1 uses (enough for the integer answers of our tiny worlds; named as a
  difference in the studies' READMEs).
- **Models**: `load_vlm(path)` (paper scale: `AutoProcessor` + `AutoModelForImageTextToText`, e.g.
  Qwen2.5-VL-7B) or `tiny_llava(...)` + `word_processor(...)`: a randomly initialised LLaVA (tiny CLIP
  vision tower + tiny Llama) with a `LlavaProcessor` over a word-level tokenizer, built offline, so CI runs
  the same TRL code path with real pixel inputs on CPU in seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_PLACEHOLDER = "<image>"
BOXED_WORDS = ["<think>", "</think>", "\\boxed{", "}"]
# A chat template for the word-level tokenizer: every piece is separated by spaces, so each word is a token.
WORD_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: "
    "{% if m['content'] is string %}{{ m['content'] }} {% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


class EasyR1FormatError(ValueError):
    """A row of an EasyR1-layout file that cannot be used (the message names the file and the row)."""


# --- data -----------------------------------------------------------------------------------------------


def write_easyr1(path: str | Path, problems: Sequence[str], answers: Sequence[str],
                 images: Sequence[Sequence[np.ndarray]], extra: Mapping[str, Sequence[Any]] | None = None) -> Path:
    """One parquet split in EasyR1's layout; `images[i]` are uint8 [H, W, 3] arrays, one per `<image>`.
    `extra`: more columns (one value per row; e.g. what a reward function needs), read back as they are."""
    from datasets import Dataset, Features, Image, List, Value
    from PIL import Image as PILImage

    if not len(problems) == len(answers) == len(images):
        raise ValueError("problems, answers and images need one entry per row")
    for i, (p, ims) in enumerate(zip(problems, images)):
        if p.count(IMAGE_PLACEHOLDER) != len(ims):
            raise ValueError(f"row {i}: {p.count(IMAGE_PLACEHOLDER)} {IMAGE_PLACEHOLDER} placeholders, {len(ims)} images")
    cols: dict[str, Any] = {"problem": list(problems), "answer": [str(a) for a in answers],
                            "images": [[PILImage.fromarray(np.asarray(a, np.uint8)) for a in ims] for ims in images]}
    base = Dataset.from_dict({k: list(v) for k, v in (extra or {}).items()}) if extra else None
    feats = Features({"problem": Value("string"), "answer": Value("string"), "images": List(Image()),
                      **(dict(base.features) if base is not None else {})})
    ds = Dataset.from_dict({**cols, **{k: list(v) for k, v in (extra or {}).items()}}, features=feats)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    ds.to_parquet(str(tmp))
    tmp.replace(path)
    return path


def problem_to_messages(problem: str, images: Sequence[Any], system: str | None = None) -> list[dict[str, Any]]:
    """EasyR1 splits the problem at each `<image>`: text and image parts in order, one user message."""
    parts: list[dict[str, Any]] = []
    pieces = problem.split(IMAGE_PLACEHOLDER)
    for k, text in enumerate(pieces):
        if text.strip():
            parts.append({"type": "text", "text": text.strip()})
        if k < len(pieces) - 1:
            parts.append({"type": "image"})
    msgs = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
    return msgs + [{"role": "user", "content": parts}]


def read_easyr1(path: str | Path, *, prompt_key: str = "problem", answer_key: str = "answer",
                image_key: str = "images", format_prompt: str | None = None,
                limit: int | None = None) -> dict[str, list[Any]]:
    """TRL dataset columns from one EasyR1-layout parquet file: `prompt` (conversational), `images`
    (PIL images), `answer` (str), and every other column as it is. `format_prompt` (e.g. EasyR1's "think,
    then \\boxed{}" instruction) is appended to each problem, as EasyR1's `format_prompt` template does."""
    from datasets import Dataset, Image, List

    path = Path(path)
    ds = Dataset.from_parquet(str(path))
    for key in (prompt_key, answer_key):
        if key not in ds.column_names:
            raise EasyR1FormatError(f"{path}: no column {key!r} (columns: {ds.column_names})")
    if image_key in ds.column_names:
        try:  # a no-op for files written by `datasets`; decodes {bytes, path} structs of other writers
            ds = ds.cast_column(image_key, List(Image()))
        except (TypeError, ValueError) as e:
            raise EasyR1FormatError(f"{path}: column {image_key!r} is not a list of images per row ({e})") from e
    n = len(ds) if limit is None else min(limit, len(ds))
    reserved = {prompt_key, answer_key, image_key, "prompt", "images", "answer"}
    others = [c for c in ds.column_names if c not in reserved]
    out: dict[str, list[Any]] = {"prompt": [], "images": [], "answer": [], **{c: [] for c in others}}
    for i in range(n):
        row = ds[i]
        problem = str(row[prompt_key])
        ims = [im.convert("RGB") for im in (row.get(image_key) or [])]
        if problem.count(IMAGE_PLACEHOLDER) != len(ims):
            raise EasyR1FormatError(f"{path}: row {i}: {problem.count(IMAGE_PLACEHOLDER)} {IMAGE_PLACEHOLDER} "
                                    f"placeholders but {len(ims)} images")
        text = problem if format_prompt is None else f"{problem} {format_prompt}"
        out["prompt"].append(problem_to_messages(text, ims))
        out["images"].append(ims)
        out["answer"].append(str(row[answer_key]))
        for c in others:
            out[c].append(row[c])
    return out


def vector_image(v: np.ndarray, scale: float, block: int = 4) -> np.ndarray:
    """uint8 [S, S, 3]: a feature vector drawn as a square grid of grey `block`-pixel blocks, value x →
    clip(128 + scale·x), unused cells mid-grey (x = 0). How the tiny worlds' vector "images" become pixels
    for a VLM; decoding the block centres gives x back to within 1/(2·scale) where it was not clipped."""
    v = np.asarray(v, np.float64).reshape(-1)
    side = int(np.ceil(np.sqrt(len(v))))
    grid = np.full(side * side, 128.0)
    grid[: len(v)] = 128 + scale * v
    g = np.clip(np.rint(grid), 0, 255).astype(np.uint8).reshape(side, side)
    g = np.repeat(np.repeat(g, block, axis=0), block, axis=1)
    return np.repeat(g[:, :, None], 3, axis=2)


# --- reward (EasyR1's math score function) ---------------------------------------------------------------


def completion_text(c: Any) -> str:
    """TRL hands conversational completions as [{"role": "assistant", "content": str}]; plain ones as str."""
    if isinstance(c, str):
        return c
    if isinstance(c, Sequence) and c and isinstance(c[-1], Mapping):
        content = c[-1].get("content", "")
        if isinstance(content, str):
            return content
        return " ".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return str(c)


def extract_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (braces matched), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def normalize_answer(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"\s+", "", s)
    try:
        x = float(s)
    except ValueError:
        return s.lower()
    return str(int(x)) if x == int(x) else repr(x)


_FORMAT = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)


def format_score(response: str) -> float:
    return 1.0 if _FORMAT.fullmatch(re.sub(r"\s*(<|>|/)\s*", r"\1", response)) else 0.0


def accuracy_score(response: str, answer: str) -> float:
    got = extract_boxed(response)
    return float(got is not None and normalize_answer(got) == normalize_answer(answer))


def make_boxed_reward(format_weight: float = 0.1):  # noqa: ANN201  (TRL's reward signature)
    """TRL reward: (1 − w)·accuracy + w·format per completion (EasyR1 math `compute_score`'s `overall`)."""

    def boxed_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
        out = []
        for c, a in zip(completions, answer):
            r = completion_text(c)
            out.append((1 - format_weight) * accuracy_score(r, str(a)) + format_weight * format_score(r))
        return out

    return boxed_reward


# --- models ----------------------------------------------------------------------------------------------


def word_processor(vocab: Sequence[str], image_size: int = 28, patch_size: int = 14) -> Any:
    """A `LlavaProcessor` over a word-level tokenizer: `<image>` expands to (image_size / patch_size)² tokens."""
    from transformers import CLIPImageProcessor, LlavaProcessor

    from paperflow.nn.trl_grpo import word_tokenizer

    words = list(dict.fromkeys(list(vocab) + BOXED_WORDS + ["user:", "assistant:", "system:", IMAGE_PLACEHOLDER]))
    tok = word_tokenizer(words)
    tok.add_tokens([IMAGE_PLACEHOLDER], special_tokens=True)  # matched inside the processor's "<image><image>…"
    ip = CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})
    return LlavaProcessor(image_processor=ip, tokenizer=tok, chat_template=WORD_CHAT_TEMPLATE, patch_size=patch_size,
                          vision_feature_select_strategy="default", image_token=IMAGE_PLACEHOLDER,
                          num_additional_image_tokens=1)


def tiny_llava(processor: Any, hidden: int = 32, layers: int = 2, vision_layers: int = 1, seed: int = 0) -> Any:
    """A randomly initialised LLaVA matching `processor` (its image size, patch size and `<image>` id)."""
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    tok = processor.tokenizer
    crop = processor.image_processor.crop_size
    torch.manual_seed(seed)
    cfg = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=vision_layers,
                                       num_attention_heads=2, image_size=int(crop["height"]),
                                       patch_size=int(processor.patch_size), projection_dim=hidden),
        text_config=LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                                num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                                max_position_embeddings=256, pad_token_id=tok.pad_token_id,
                                bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id),
        image_token_index=tok.convert_tokens_to_ids(IMAGE_PLACEHOLDER),
        vision_feature_select_strategy="default", vision_feature_layer=-1,
    )
    return LlavaForConditionalGeneration(cfg)


def load_vlm(path: str | Path, dtype: Any = None) -> tuple[Any, Any]:
    """(model, processor) of a local VLM checkpoint (paper scale, e.g. Qwen2.5-VL-7B); `dtype`: a torch dtype."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    kw = {"dtype": dtype} if dtype is not None else {}
    return AutoModelForImageTextToText.from_pretrained(str(path), **kw), AutoProcessor.from_pretrained(str(path))


def generate_answers(model: Any, processor: Any, rows: Mapping[str, Sequence[Any]], max_new_tokens: int,
                     batch_size: int = 8) -> list[str]:
    """Greedy completions of `rows` (the columns `read_easyr1` returns), `batch_size` prompts per call."""
    return [c[0] for c in _generate(model, processor, rows, max_new_tokens, {"do_sample": False}, batch_size)]


def sample_answers(model: Any, processor: Any, rows: Mapping[str, Sequence[Any]], max_new_tokens: int, n: int,
                   temperature: float, batch_size: int = 8) -> list[list[str]]:
    """`n` sampled completions per row (temperature, no top-k/top-p truncation; seed torch first)."""
    return _generate(model, processor, rows, max_new_tokens,
                     {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0, "num_return_sequences": n},
                     batch_size)


def _with_images(prompt: Sequence[Mapping[str, Any]], ims: Sequence[Any]) -> list[dict[str, Any]]:
    """The row's messages with its images put into its image parts, as TRL does before the processor."""
    msgs, k = [], 0
    for m in prompt:
        parts = []
        for part in m["content"] if not isinstance(m["content"], str) else [{"type": "text", "text": m["content"]}]:
            if part.get("type") == "image":
                parts.append({"type": "image", "image": ims[k]})
                k += 1
            else:
                parts.append(part)
        msgs.append({**m, "content": parts})
    return msgs


def _generate(model: Any, processor: Any, rows: Mapping[str, Sequence[Any]], max_new_tokens: int,
              kw: Mapping[str, Any], batch_size: int) -> list[list[str]]:
    """Left-padded batches of consecutive rows of one modality (a processor cannot batch image and text-only
    prompts together), on the model's device; → per row, the decoded new tokens of each returned sequence."""
    import torch

    tok = processor.tokenizer
    n_ret = int(kw.get("num_return_sequences", 1))
    convs = [_with_images(pr, ims or []) for pr, ims in zip(rows["prompt"], rows["images"])]
    has_img = [bool(ims) for ims in rows["images"]]
    outs: list[list[str]] = []
    side = tok.padding_side
    tok.padding_side = "left"
    try:
        i = 0
        while i < len(convs):
            j = i + 1
            while j < len(convs) and j - i < batch_size and has_img[j] == has_img[i]:
                j += 1
            batch = processor.apply_chat_template(convs[i:j], add_generation_prompt=True, tokenize=True,
                                                  return_dict=True, return_tensors="pt", padding=True)
            batch = batch.to(model.device)
            with torch.no_grad():
                g = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, **kw)
            new = g[:, batch["input_ids"].shape[1]:]
            texts = [tok.decode(r, skip_special_tokens=True) for r in new]
            outs += [texts[k * n_ret:(k + 1) * n_ret] for k in range(j - i)]
            i = j
    finally:
        tok.padding_side = side
    return outs


def modality_blocks(rows: Mapping[str, Sequence[Any]], block: int, rng: np.random.Generator) -> dict[str, list[Any]]:
    """Reorder rows so every consecutive `block` rows are all image prompts or all text-only prompts.

    TRL 1.16 hands a batch's images to the processor as one list per prompt, and a text-only prompt in a
    batch with images breaks the LLaVA processor; a mixed dataset (the merged arm) is therefore trained
    with `shuffle_dataset=False` on these blocks, which are in a seeded random order. Rows that do not
    fill a last block of their modality are dropped (at most block − 1 per modality)."""
    n = len(rows["prompt"])
    groups: dict[bool, list[int]] = {True: [], False: []}
    for i in range(n):
        groups[bool(rows["images"][i])].append(i)
    blocks = [g[k:k + block] for g in groups.values() for k in range(0, len(g) - block + 1, block)]
    order = [i for b in rng.permutation(len(blocks)) for i in blocks[int(b)]]
    return {c: [rows[c][i] for i in order] for c in rows}
