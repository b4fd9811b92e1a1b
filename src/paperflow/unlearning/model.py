"""Tokenizer and causal LM, two tiers through the same code.

- tiny: a word-level tokenizer trained on the data by `tokenizers`, and a Llama-style decoder built
  from `transformers.LlamaConfig` (random init).
- pretrained: any local `save_pretrained` directory (e.g. SmolLM2-135M converted from GGUF by the
  lm rules) with its own tokenizer.

Prompt format (both tiers): "Question: {q}\nAnswer:" then " {answer}" and EOS; loss on answer tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paperflow.core.io import atomic_path

SPECIALS = {"pad_token": "<pad>", "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}


def prompt_text(question: str) -> str:
    return f"Question: {question}\nAnswer:"


def train_tokenizer(texts: Sequence[str], out_dir: str | Path) -> int:
    """Word-level tokenizer over the data's words (Whitespace pre-tokenizer); returns vocab size."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=SPECIALS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIALS.values()), min_frequency=1)
    tok.train_from_iterator(list(texts), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIALS)
    with atomic_path(out_dir) as tmp:
        fast.save_pretrained(tmp)
    return fast.vocab_size


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                    "tokenizer.model", "added_tokens.json", "config.json")  # config.json: AutoTokenizer may read it


def _tokenizer_key(path: Path) -> tuple[tuple[str, str], ...]:
    """(file name, sha256) of the tokenizer files of a save_pretrained dir (`core.io.file_digest`)."""
    from paperflow.core.io import file_digest

    return tuple((name, file_digest(path / name)) for name in _TOKENIZER_FILES if (path / name).is_file())


def load_tokenizer(path: str | Path):
    """The tokenizer of a save_pretrained dir (pad = EOS when it has none).

    Loaded once per process per distinct set of tokenizer files: every tiny model directory carries a
    byte-identical copy of the pipeline's tokenizer, and `AutoTokenizer.from_pretrained` costs ≈ 0.25 s,
    paid 9-11 times by each `train` / `sample` job before (issue 24). The returned object is shared, so
    callers must not mutate it (none does: encode, decode and save_pretrained only)."""
    path = Path(path)
    key = _tokenizer_key(path) if path.is_dir() else str(path)  # a hub id (the real tier) as itself
    if key not in _TOKENIZERS:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path))
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        _TOKENIZERS[key] = tok
    return _TOKENIZERS[key]


_TOKENIZERS: dict[Any, Any] = {}


def build_tiny(m: dict[str, Any], tok) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=m["hidden_size"], num_hidden_layers=m["num_layers"],
        num_attention_heads=m["num_heads"], num_key_value_heads=m["num_heads"],
        intermediate_size=m["intermediate_size"], max_position_embeddings=m["max_position"],
        tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id, rms_norm_eps=1e-5,
    )
    return LlamaForCausalLM(cfg)


def default_device() -> str:
    """Where a stage puts its model: "cuda" when torch sees a GPU, else "cpu"."""
    from paperflow.core.accel import cuda_available

    return "cuda" if cuda_available() else "cpu"


def model_device(model):
    """The device of the model's parameters (inputs, masks and generators must live there)."""
    return next(model.parameters()).device


def to_device(batch: dict, device) -> dict:
    """Every tensor of a batch dict on `device` (non-tensors passed through)."""
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items()}


def load_model(path: str | Path, device="cpu"):
    """A save_pretrained dir in float32, eval mode, on `device` (loaded on the CPU, then moved). The
    CLI stages pass `default_device()`; the default stays the CPU for other callers (bench/)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    model.to(device)
    model.eval()
    return model


def save_model(model, tok, out_dir: str | Path, extra: dict[str, str] | None = None) -> None:
    """save_pretrained (safetensors) of model + tokenizer, atomically; `extra` = {filename: text}."""
    with atomic_path(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        for name, text in (extra or {}).items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text)


# ---------------------------------------------------------------- encoding and batching
def prefix_ids(tok) -> list[int]:
    return [tok.bos_token_id] if tok.bos_token_id is not None else []


def encode_prompt(tok, question: str) -> list[int]:
    return prefix_ids(tok) + tok.encode(prompt_text(question), add_special_tokens=False)


def encode_pair(tok, question: str, answer: str) -> tuple[list[int], int]:
    """(ids, n_prompt): prompt ids + answer ids + EOS; loss only on the answer part."""
    p = encode_prompt(tok, question)
    a = tok.encode(" " + answer, add_special_tokens=False) + [tok.eos_token_id]
    return p + a, len(p)


def collate(items: Sequence[tuple[list[int], int]], pad_id: int):
    """Right-padded input_ids, attention_mask, labels (-100 on prompt and padding)."""
    import torch

    L = max(len(ids) for ids, _ in items)
    ids = torch.full((len(items), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), L), dtype=torch.long)
    labels = torch.full((len(items), L), -100, dtype=torch.long)
    for i, (x, n_p) in enumerate(items):
        ids[i, : len(x)] = torch.tensor(x)
        mask[i, : len(x)] = 1
        labels[i, n_p: len(x)] = torch.tensor(x[n_p:])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def token_logprobs(model, batch):
    """Per-sequence (sum of answer-token log-probs, number of answer tokens)."""
    import torch

    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    logits = out.logits[:, :-1].float()
    labels = batch["labels"][:, 1:]
    mask = labels != -100
    lp = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (lp * mask).sum(-1), mask.sum(-1).clamp(min=1)


def mean_ce(model, batch):
    """Mean token cross-entropy over the answer tokens of the batch."""
    s, n = token_logprobs(model, batch)
    return -s.sum() / n.sum()
