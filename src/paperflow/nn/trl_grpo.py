"""The paper-scale RL path: TRL's `GRPOTrainer` on a Hugging Face causal LM, with our reward functions.

At paper scale the RL studies (`staged_rl`, `video_bci`) train a real (V)LM with TRL, the library users run;
the tiny tier uses `paperflow.nn.grpo` on our small policies because TRL's generate-score-update loop on
an HF model does not fit a tiny default's minutes on 2 cores. This module is the one place that maps our
config onto `trl.GRPOConfig`, so both studies pass the same knobs (group size G, clip epsilon, KL beta,
completion length) and CI exercises the same code on a tiny random Llama with a word-level tokenizer.

A reward function has TRL's signature: `fn(completions: list[str], **dataset_columns) -> list[float]`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class GRPOSettings:
    """The knobs the studies' configs set; everything else is TRL's default."""

    num_generations: int = 8  # G
    prompts_per_step: int = 2  # the per-device batch is prompts_per_step * G completions
    max_completion_length: int = 16
    max_steps: int = 10
    learning_rate: float = 1e-5
    beta: float = 0.0  # KL coefficient to the reference policy (EasyR1 uses 1e-2)
    epsilon: float = 0.2  # PPO clip
    temperature: float = 1.0
    seed: int = 0
    use_cpu: bool = True
    logging_steps: int = 1
    shuffle: bool = True  # False keeps the dataset's order (trl_vlm.modality_blocks)
    save_steps: int = 0  # > 0: a resumable Trainer checkpoint in output_dir every save_steps steps


def word_tokenizer(vocab: Sequence[str], pad: str = "<pad>", eos: str = "<eos>") -> Any:
    """A whitespace word-level fast tokenizer over a fixed vocabulary (for tiny policies and tests)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [pad, eos] + [w for w in vocab if w not in (pad, eos)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=pad))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins word tokens with single spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=pad, eos_token=eos)


def tiny_llama(vocab_size: int, hidden: int = 32, layers: int = 2, heads: int = 2, seed: int = 0) -> Any:
    """A randomly initialised tiny Llama (pad id 0, eos id 1, as `word_tokenizer` assigns them)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=1,
    )
    return LlamaForCausalLM(cfg)


def make_trainer(
    model: Any,
    tokenizer: Any,
    rows: dict[str, list[Any]],
    reward_fns: Sequence[Callable[..., list[float]]],
    settings: GRPOSettings,
    output_dir: str | Path,
) -> Any:
    """A `trl.GRPOTrainer` over `rows` (a column dict with at least "prompt"; other columns reach the rewards)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    if "prompt" not in rows:
        raise ValueError("rows needs a 'prompt' column")
    args = GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=settings.prompts_per_step * settings.num_generations,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        beta=settings.beta,
        epsilon=settings.epsilon,
        temperature=settings.temperature,
        seed=settings.seed,
        use_cpu=settings.use_cpu,
        # TRL defaults bf16=True; on CPU that sets a process-global bf16 AcceleratorState
        bf16=not settings.use_cpu,
        logging_steps=settings.logging_steps,
        report_to=[],
        save_strategy="steps" if settings.save_steps > 0 else "no",
        save_steps=max(1, settings.save_steps),
        save_total_limit=1 if settings.save_steps > 0 else None,
        disable_tqdm=True,
        shuffle_dataset=settings.shuffle,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=list(reward_fns),
        args=args,
        train_dataset=Dataset.from_dict(rows),
        processing_class=tokenizer,
    )


def train(
    model: Any,
    tokenizer: Any,
    rows: dict[str, list[Any]],
    reward_fns: Sequence[Callable[..., list[float]]],
    settings: GRPOSettings,
    output_dir: str | Path,
    *,
    stop_after: int | None = None,
) -> list[dict[str, float]] | None:
    """Run GRPO and return TRL's per-step log (reward mean/std, KL, clip ratios, completion lengths).

    With `settings.save_steps > 0`, the Trainer checkpoints into `output_dir` (weights, optimizer, scheduler,
    RNG states, log) and a later call with the same `output_dir` resumes from the newest checkpoint there
    (`resume_from_checkpoint`), ending with the weights of an uninterrupted run (tested). `stop_after`
    (tests: a simulated kill) stops after that many steps and returns None."""
    from transformers import TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint

    trainer = make_trainer(model, tokenizer, rows, reward_fns, settings, output_dir)
    if stop_after is not None:

        class _Stop(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201, ARG002
                if state.global_step >= stop_after:
                    control.should_training_stop = True
                return control

        trainer.add_callback(_Stop())
    last = get_last_checkpoint(str(output_dir)) if settings.save_steps > 0 and Path(output_dir).is_dir() else None
    try:
        trainer.train(resume_from_checkpoint=last)
    finally:
        reset_accelerate_state()
    if stop_after is not None and trainer.state.global_step < settings.max_steps:
        return None
    return [dict(h) for h in trainer.state.log_history if "reward" in h]


def reset_accelerate_state() -> None:
    """Forget accelerate's process-global state, which the Trainer sets (device, mixed precision).

    Without this, a later `Accelerator(mixed_precision=...)` in the same process (another stage
    run in-process, or the next test) refuses to start with different settings.
    """
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
