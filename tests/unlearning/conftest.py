import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PAPERFLOW_PROGRESS", "0")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A word-level tokenizer trained on generated TOFU data and a small random Llama."""
    import torch

    from paperflow.unlearning.data import generate_tofu, load_tofu
    from paperflow.unlearning.model import build_tiny, load_tokenizer, prompt_text, train_tokenizer

    d = tmp_path_factory.mktemp("ul")
    generate_tofu(d / "data", 10, 4, 1, seed=0, n_utility=4)
    rows, _ = load_tofu(d / "data", "full", qa_per_author=4)
    train_tokenizer([prompt_text(r["question"]) for r in rows] + [r["answer"] for r in rows], d / "tok")
    tok = load_tokenizer(d / "tok")
    torch.manual_seed(0)
    model = build_tiny({"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64,
                        "max_position": 64}, tok).eval()
    return tok, model, rows, d
