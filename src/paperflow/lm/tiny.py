"""A tiny Llama-style causal LM trained by the pipeline (seconds-to-minutes on CPU): byte-level BPE
tokenizer trained with `tokenizers` on a text split, `LlamaForCausalLM` (RMSNorm, RoPE, SwiGLU,
HF module names q/k/v/o/gate/up/down) trained with AdamW + cosine schedule, saved with
`save_pretrained` (safetensors + tokenizer) so it loads exactly like a real checkpoint."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def train_tokenizer(text: str, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text.split("\n\n"), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def train_tiny_lm(train_text: str, out_dir: str | Path, p: dict[str, Any]) -> dict:
    """p: max_train_chars (optional), vocab_size, d_model, layers, heads, intermediate, context, batch, steps, lr, weight_decay, seed."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from paperflow.core.progress import progress
    from paperflow.core.seeding import seed_everything, stream

    seed_everything(p["seed"])
    if p.get("max_train_chars"):
        train_text = train_text[: p["max_train_chars"]]
    tok = train_tokenizer(train_text, p["vocab_size"])
    ids = np.asarray(tok(train_text, add_special_tokens=False)["input_ids"], dtype=np.int64)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=p["d_model"], num_hidden_layers=p["layers"],
                      num_attention_heads=p["heads"], num_key_value_heads=p["heads"],
                      intermediate_size=p["intermediate"], max_position_embeddings=max(2048, p["context"]),
                      tie_word_embeddings=True, rms_norm_eps=1e-5, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id)
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], weight_decay=p["weight_decay"], betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, p["steps"] // 20)) * 0.5 * (1 + math.cos(math.pi * s / p["steps"])))
    rng = stream(p["seed"], "tiny_lm_batches")
    T = p["context"]
    losses = []
    model.train()
    for step in progress(range(p["steps"]), desc="tiny lm"):
        starts = rng.integers(0, len(ids) - T - 1, size=p["batch"])
        x = torch.from_numpy(np.stack([ids[s:s + T] for s in starts]))
        loss = model(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    return {"n_params": sum(t.numel() for t in model.parameters()), "train_tokens": int(len(ids)),
            "loss_first": losses[0], "loss_last_10": float(np.mean(losses[-10:]))}
