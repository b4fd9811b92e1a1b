"""Device plumbing of sampling, training batches and the methods, without a GPU (CPU-only tests).

Two stand-ins for "the model is on CUDA while torch's default device is the CPU":
- run with torch's default device set to `meta` while the model stays on the CPU: any tensor made
  without an explicit device lands on `meta` and the model refuses it;
- put a module on `meta` and check that what meets it (control vectors, reference model) follows.
Nothing here runs on CUDA."""

from types import SimpleNamespace

import pytest
import torch

from paperflow.unlearning.methods import build_method
from paperflow.unlearning.model import collate, encode_pair, encode_prompt, model_device, to_device
from paperflow.unlearning.sampling import GREEDY, Decoder, left_pad, sample_one_at_a_time, sample_shared_prefix


def test_to_device_and_model_device():
    b = {"input_ids": torch.ones(2, 3, dtype=torch.long), "attention_mask": torch.ones(2, 3), "n": 3}
    m = to_device(b, "meta")
    assert m["input_ids"].device.type == "meta" and m["attention_mask"].device.type == "meta" and m["n"] == 3
    assert to_device(b, "cpu")["input_ids"] is b["input_ids"]  # no copy on the CPU
    lin = torch.nn.Linear(2, 2)
    assert model_device(lin).type == "cpu" and model_device(lin.to("meta")).type == "meta"


def test_default_device_follows_cuda_availability(monkeypatch):
    from paperflow.unlearning.model import default_device

    monkeypatch.setattr("paperflow.core.accel.cuda_available", lambda: True)
    assert default_device() == "cuda"
    monkeypatch.setattr("paperflow.core.accel.cuda_available", lambda: False)
    assert default_device() == "cpu"


def test_left_pad_values_and_device():
    ids, mask, pos = left_pad([[5, 6, 7], [8]], 0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert pos.tolist() == [[0, 1, 2], [0, 0, 0]] and ids.dtype == mask.dtype == torch.long
    assert all(t.device.type == "meta" for t in left_pad([[5, 6, 7], [8]], 0, "meta"))


@pytest.mark.parametrize("dec,n", [(GREEDY, 1), (Decoder("T1", 1.0, 0.9, 20), 4)])
def test_sampling_builds_inputs_on_the_model_device(tiny_lm, dec, n):
    """With torch's default device != the model's device (meta here, CPU on a GPU node), sampling
    must still put every input, mask and the generator on the model's device; CPU outputs unchanged."""
    tok, model, rows, _ = tiny_lm
    prompts = [encode_prompt(tok, r["question"]) for r in rows[:3]]
    args = (n, dec, 6, tok.eos_token_id, tok.pad_token_id)
    ref = sample_shared_prefix(model, prompts, *args, seed=1, prompts_per_batch=2)
    with torch.device("meta"):
        out = sample_shared_prefix(model, prompts, *args, seed=1, prompts_per_batch=2)
    assert out == ref


def test_one_at_a_time_baseline_puts_prompts_on_the_model_device(tiny_lm):
    tok, model, rows, _ = tiny_lm
    prompts = [encode_prompt(tok, r["question"]) for r in rows[:2]]
    ref = sample_one_at_a_time(model, prompts, 1, GREEDY, 5, tok.eos_token_id, tok.pad_token_id, seed=0)
    seen = []
    real_generate = model.generate

    def generate(x, **kw):  # HF generate needs its prompt on the model's device
        seen.append(x.device)
        return real_generate(x, **kw)

    model.generate = generate
    try:
        with torch.device("meta"):
            out = sample_one_at_a_time(model, prompts, 1, GREEDY, 5, tok.eos_token_id, tok.pad_token_id, seed=0)
    finally:
        del model.generate
    assert out == ref and seen and all(d.type == "cpu" for d in seen)


class _Stub(torch.nn.Module):
    """A causal-LM-shaped module: embeddings as every hidden state, logits = hidden @ E^T."""

    def __init__(self, vocab=11, d=6):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(vocab, d)

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False, **_):
        h = self.emb(input_ids)
        return SimpleNamespace(hidden_states=(h, h, h), logits=h @ self.emb.weight.T)


def _meta_batch():
    b = collate([([1, 2, 3, 4], 2), ([5, 6, 7], 1)], 0)
    return to_device(b, "meta")


def test_rmu_control_vector_follows_the_hidden_states():
    rmu = build_method({"loss": "rmu", "layer": 0, "steering_coef": 2.0, "seed_u": 3}, _Stub())
    u_cpu = rmu._control(6).clone()
    g = torch.Generator().manual_seed(3)
    u = torch.rand(6, generator=g)
    assert torch.equal(u_cpu, 2.0 * u / u.norm())  # same vector as before on the CPU
    model = _Stub().to("meta")  # stands in for a model on CUDA
    rmu.ref = _Stub().to("meta")
    loss = rmu.forget_loss(model, _meta_batch())
    assert loss.device.type == "meta" and loss.shape == ()
    assert rmu.retain_loss(model, _meta_batch()).device.type == "meta"


@pytest.mark.parametrize("name", ["npo", "rmu"])
def test_reference_model_is_placed_with_the_policy(name):
    from paperflow.unlearning.train import place_ref

    hp = {"npo": {"beta": 0.1}, "rmu": {"layer": 0}}[name]  # a method refuses hyperparameters it does not take
    method = build_method({"loss": name, **hp}, _Stub())
    model = _Stub().to("meta")
    place_ref(method, model)
    assert model_device(method.ref).type == "meta"
    assert method.forget_loss(model, _meta_batch()).device.type == "meta"  # NPO/RMU read the reference here
    assert method.retain_loss(model, _meta_batch()).device.type == "meta"
    place_ref(build_method({"loss": "grad_diff"}, None), model)  # no reference: nothing to do


def test_unlearn_steps_batches_follow_the_model(tiny_lm):
    """One CPU step of the training loop with NPO: batches and the reference follow the model."""
    import numpy as np

    from paperflow.unlearning.train import frozen_copy, unlearn_steps

    tok, model0, rows, _ = tiny_lm
    model = frozen_copy(model0)
    for q in model.parameters():
        q.requires_grad_(True)
    items = [encode_pair(tok, r["question"], r["answer"]) for r in rows[:8]]
    method = build_method({"loss": "npo", "beta": 0.1, "alpha": 1.0}, frozen_copy(model0))
    p = {"lr": 1e-3, "batch_forget": 2, "batch_retain": 2, "check_every": 10}
    logs, done = unlearn_steps(model, tok, method, items[:4], items[4:], p, np.random.default_rng(0), 1)
    assert done == 1 and model_device(method.ref) == model_device(model)
