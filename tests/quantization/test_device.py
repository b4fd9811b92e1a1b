"""Device plumbing of the quantization study, checked without a GPU.

No CUDA device is available where these tests run, so nothing here shows that the CUDA path works
or is fast. What they do check, on the CPU:
  * the one device decision per job (`job_device`) and that it follows `cuda_available`;
  * that results stay on the device of the inputs/model, using PyTorch's "meta" device as a
    second device (shapes only, no data). Mixing is not always an error on meta (a CPU index into
    a meta tensor just works), so this alone does not catch every stray CPU tensor; hence:
  * that nothing is created on the *default* device: under `with torch.device("meta")` every
    factory call without an explicit device makes a meta tensor, so CPU inputs must still give
    CPU outputs, equal to a plain run. This also covers functions that need real values (float()).
  * that the model receives its token windows / cached states on its own device (a small stand-in
    model on meta that records what reached it; the HF Llama cannot run on meta).
"""

import copy
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from paperflow.quantization.calibrate import capture_inputs, sequential_quantize
from paperflow.quantization.cross_unlearning import rtn_codes
from paperflow.quantization.e2m import e2m_gptq, e2m_stage1, rtn_int4, rtn_ternary
from paperflow.quantization.evaluate import all_layer_inputs, mean_nll, nll_from_layer
from paperflow.quantization.ilaamp import sensitivity_sweep
from paperflow.quantization.kotms import learn_kotms, random_kron
from paperflow.quantization.lac import calibrate_clips
from paperflow.quantization.ops import act_quant, cayley, int4_dequant, rotate_in, ternary_dequant
from paperflow.quantization.qmodel import LINEAR_ORDER, QLinear, job_device, model_device, qlinears

META = torch.device("meta")


def _W(m=12, n=40, seed=0):
    return torch.randn(m, n, generator=torch.Generator().manual_seed(seed)) * 0.05


def _H(n, seed=1, N=200):
    X = torch.randn(N, n, generator=torch.Generator().manual_seed(seed)) + 0.2
    return (X.T @ X / N).to(torch.float64)


def test_job_device_is_cpu_without_cuda_and_follows_cuda_available(monkeypatch):
    import paperflow.core.accel as accel

    assert job_device() == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(accel, "cuda_available", lambda: True)
    assert job_device().type == "cuda"  # only the decision; no CUDA tensor is made
    monkeypatch.setattr(accel, "cuda_available", lambda: False)
    assert job_device() == torch.device("cpu")


def test_model_device_is_where_the_parameters_are(tiny_llama):
    assert model_device(tiny_llama) == torch.device("cpu")
    assert model_device(tiny_llama.to(META)) == META


def test_pure_functions_return_on_the_input_device():
    W = _W().to(META)
    for rec in (rtn_ternary(W), rtn_int4(W)):
        for v in vars(rec).values():
            if isinstance(v, torch.Tensor):
                assert v.device == W.device
        assert rec.dequant().device == W.device
    t = torch.zeros(5, 70, dtype=torch.int8, device=META)
    mu = torch.zeros(5, 3, device=META)
    assert ternary_dequant(t, mu, mu, 32).device == W.device
    assert int4_dequant(t, torch.zeros(5, device=META)).device == W.device
    w64 = W.to(torch.float64)
    tt, m1, a1 = e2m_stage1(w64)
    assert tt.device == m1.device == a1.device == W.device
    assert act_quant(W, 4, 0.9).device == W.device
    S = torch.zeros(4, 4, device=META)
    assert cayley(S).device == W.device
    assert rotate_in(W, torch.zeros(4, 4, device=META), torch.zeros(10, 10, device=META)).device == W.device
    for scheme in ("rtn_w8", "rtn_w4", "rtn_ternary"):
        q, wq = rtn_codes(W, scheme)
        assert q.device == wq.device == W.device


def test_e2m_gptq_creates_nothing_on_the_default_device():
    W, H = _W(16, 70), _H(70)
    ref = e2m_gptq(W, H, block=32)
    with torch.device(META):  # any factory call without device= would now make a meta tensor
        rec = e2m_gptq(W, H, block=32)
    for a, b in ((rec.t, ref.t), (rec.mu, ref.mu), (rec.alpha, ref.alpha)):
        assert a.device == W.device and torch.equal(a, b)


def test_dequant_and_random_rotations_create_nothing_on_the_default_device():
    t = rtn_ternary(_W(6, 70)).t
    mu, alpha = _W(6, 3, seed=1), _W(6, 3, seed=2).abs()  # three 32-column blocks
    ref = ternary_dequant(t, mu, alpha, 32)
    Cr, Br = random_kron(_W(8, 48), torch.Generator().manual_seed(7))
    with torch.device(META):
        got = ternary_dequant(t, mu, alpha, 32)
        Cm, Bm = random_kron(_W(8, 48), torch.Generator(device="cpu").manual_seed(7))
    assert got.device == torch.device("cpu") and torch.equal(got, ref)
    assert Cm.device == Bm.device == torch.device("cpu") and torch.equal(Cm, Cr) and torch.equal(Bm, Br)


def test_kotms_creates_nothing_on_the_default_device():
    W = _W(32, 64, seed=3)
    ref = learn_kotms(W, iters=4, rows_per_iter=20, gen=torch.Generator().manual_seed(5))
    with torch.device(META):
        C, B, log = learn_kotms(W, iters=4, rows_per_iter=20, gen=torch.Generator(device="cpu").manual_seed(5))
    assert C.device == B.device == W.device
    assert torch.equal(C, ref[0]) and torch.equal(B, ref[1]) and log == ref[2]


def test_qlinear_rotation_moves_to_the_weight_device_and_with_the_module():
    W = _W(8, 48)
    C, B = random_kron(W, torch.Generator().manual_seed(0))  # CPU factors, as read from kotms.safetensors
    lin = QLinear(W.to(META))
    lin.set_rotation(C, B)
    assert lin.C.device == lin.B.device == lin.weight.device == META
    assert lin(torch.zeros(3, 48, device=META)).device == META
    # rotations are module buffers: .to() converts them, but they stay out of the state dict
    lin2 = QLinear(W)
    lin2.set_rotation(C, B)
    assert set(lin2.state_dict()) == {"weight"}
    lin2.to(torch.float64)
    assert lin2.C.dtype == lin2.B.dtype == lin2.weight.dtype == torch.float64


class _ToyBlock(nn.Module):
    """A decoder block with the linear names of LINEAR_ORDER; records the device of its input."""

    def __init__(self, d: int, seen: list) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(d)
        self.self_attn, self.mlp, self.seen = nn.Module(), nn.Module(), seen
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self.self_attn, n, QLinear(torch.randn(d, d, generator=g) * 0.1))
        for n, shape in (("gate_proj", (2 * d, d)), ("up_proj", (2 * d, d)), ("down_proj", (d, 2 * d))):
            setattr(self.mlp, n, QLinear(torch.randn(*shape, generator=g) * 0.1))

    def forward(self, hs, **kw):
        self.seen.append(("block", hs.device))
        a, m = self.self_attn, self.mlp
        h = hs + a.o_proj(a.q_proj(hs) * a.k_proj(hs) + a.v_proj(hs))
        return (h + m.down_proj(m.gate_proj(h) * m.up_proj(h)),)


class _Toy(nn.Module):
    """Stand-in for a causal LM with what the calibration/evaluation code touches (model.layers,
    model.norm, lm_head, model(ids).logits). On the meta device, unlike the HF Llama (whose mask
    code calls .item()), it runs; `seen` records where its token ids and block inputs arrived."""

    def __init__(self, d: int = 8, vocab: int = 16, n_layers: int = 2) -> None:
        super().__init__()
        self.seen: list = []
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab, d)
        self.model.layers = nn.ModuleList(_ToyBlock(d, self.seen) for _ in range(n_layers))
        self.model.norm = nn.Identity()
        self.lm_head = nn.Linear(d, vocab)

    def forward(self, ids, use_cache=False):
        self.seen.append(("ids", ids.device))
        h = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            h = layer(h)[0]
        return SimpleNamespace(logits=self.lm_head(self.model.norm(h)))


def _toy_on_meta():
    toy = _Toy().to(META)
    win = torch.randint(0, 16, (3, 6), generator=torch.Generator().manual_seed(0))  # CPU, as loaded
    return toy, win


def test_calibration_follows_the_model_device():
    toy, win = _toy_on_meta()
    states = capture_inputs(toy, win, 2)
    assert len(states) == 2 and all(hs.device == META for hs, _ in states)
    hs_info = []

    def q(name, lin, H):
        hs_info.append((name, H.device, H.dtype, lin.weight.device))

    sequential_quantize(toy, win, 2, q)
    assert [n for n, *_ in hs_info] == [f"model.layers.{i}.{s}" for i in range(2) for g in LINEAR_ORDER for s in g]
    assert all(tuple(rest) == (META, torch.float64, META) for _, *rest in hs_info)
    assert toy.seen and all(d == META for _, d in toy.seen)  # the CPU windows were moved to the model


def test_evaluation_and_lac_feed_the_model_on_its_device():
    # the meta model has no values, so the first float() fails; what reached the model is checked
    toy, win = _toy_on_meta()
    with pytest.raises((RuntimeError, NotImplementedError)):
        mean_nll(toy, win, 2)
    with pytest.raises((RuntimeError, NotImplementedError)):
        calibrate_clips(toy, win, [4], [0.5, 1.0], 2)
    cpu_cache = [(torch.zeros(2, 6, 8), {})]  # a cached layer input kept on the host (ilaamp)
    with pytest.raises((RuntimeError, NotImplementedError)):
        nll_from_layer(toy, 1, cpu_cache, win)
    assert [k for k, _ in toy.seen].count("ids") == 2 and toy.seen[-1] == ("block", META)
    assert all(d == META for _, d in toy.seen)


def test_layer_cache_kept_on_the_requested_device(tiny_llama):
    win = torch.randint(0, 64, (3, 8), generator=torch.Generator().manual_seed(2))
    plain = all_layer_inputs(tiny_llama, win, 2)
    stored = all_layer_inputs(tiny_llama, win, 2, store_device=META)
    assert len(stored) == len(plain) == 2
    assert all(hs.device == META for st in stored for hs, _ in st)
    same = all_layer_inputs(tiny_llama, win, 2, store_device="cpu")  # what ilaamp asks for; CPU model: unchanged
    assert all(torch.equal(a, b) for sa, sp in zip(same, plain) for (a, _), (b, _) in zip(sa, sp))


def test_study_functions_create_nothing_on_the_default_device(tiny_llama):
    """The whole CPU path (calibration + E2M-ATQ, perplexity, LAC, ILA-AMP sweep) under a meta
    default device gives the same numbers as a plain run: no tensor is made without a device."""
    win = torch.randint(0, 64, (4, 8), generator=torch.Generator().manual_seed(1))

    def run(model):
        recs = {}

        def q(name, lin, H):
            recs[name] = e2m_gptq(lin.weight, H, block=16)
            lin.weight = recs[name].dequant()

        sequential_quantize(model, win, 2, q)
        out = {"nll": mean_nll(model, win, 2), "clips": calibrate_clips(model, win, [4], [0.5, 0.9, 1.0], 2),
               "sens": sensitivity_sweep(model, win, [4, 8], 8, 0.9, 2)}
        return out, recs

    other = copy.deepcopy(tiny_llama)
    ref, ref_recs = run(tiny_llama)
    with torch.device(META):
        got, recs = run(other)
    assert got == ref
    for name, r in recs.items():
        assert r.t.device == torch.device("cpu") and torch.equal(r.t, ref_recs[name].t)
        assert torch.equal(r.mu, ref_recs[name].mu) and torch.equal(r.alpha, ref_recs[name].alpha)


def test_packed_model_loads_onto_the_requested_device(tiny_llama, tmp_path):
    from paperflow.quantization.store import load_quantized, save_quantized

    base = tmp_path / "base"
    tiny_llama.config.save_pretrained(base)
    records = {}
    gen = torch.Generator().manual_seed(1)
    for name, lin in qlinears(tiny_llama).items():
        lin.set_rotation(*random_kron(lin.weight, gen))
        records[name] = rtn_ternary(lin.weight)
        lin.weight = records[name].dequant()
    save_quantized(tmp_path / "q", tiny_llama, records, base, "test")
    cpu, _ = load_quantized(tmp_path / "q")
    moved, _ = load_quantized(tmp_path / "q", device=META)
    assert model_device(cpu) == torch.device("cpu") and model_device(moved) == META
    for name, lin in qlinears(moved).items():
        assert lin.weight.device == lin.C.device == lin.B.device == META
        assert torch.equal(qlinears(cpu)[name].weight, qlinears(tiny_llama)[name].weight)
