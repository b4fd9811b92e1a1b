import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PAPERFLOW_PROGRESS", "0")


def make_tiny_llama(num_layers: int = 2):
    """A random tiny Llama (fp32, seed 0) with its decoder linears wrapped as QLinear."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from paperflow.quantization.qmodel import wrap_linears

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=num_layers, num_attention_heads=2,
                      num_key_value_heads=2, intermediate_size=64, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg).eval()
    wrap_linears(model)
    return model


@pytest.fixture
def tiny_llama():
    """A random tiny Llama (fp32) with its decoder linears wrapped as QLinear."""
    return make_tiny_llama(2)


@pytest.fixture
def tiny_llama_factory():
    """`make_tiny_llama(num_layers)` for tests that need another depth."""
    return make_tiny_llama
