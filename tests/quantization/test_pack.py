import json

import pytest
import torch

from paperflow.quantization.e2m import e2m_gptq, rtn_int4, rtn_ternary
from paperflow.quantization.ops import int4_dequant, ternary_dequant
from paperflow.quantization.pack import pack_int4, pack_ternary, unpack_int4, unpack_ternary


@pytest.mark.parametrize("n", [1, 3, 4, 7, 130])
def test_ternary_pack_roundtrip(n):
    g = torch.Generator().manual_seed(n)
    t = torch.randint(-1, 2, (5, n), generator=g).to(torch.int8)
    p = pack_ternary(t)
    assert p.dtype == torch.uint8 and p.shape == (5, (n + 3) // 4)
    assert torch.equal(unpack_ternary(p, n), t)


def test_ternary_code_layout_and_invalid_code():
    t = torch.tensor([[1, -1, 0, 1]], dtype=torch.int8)
    assert int(pack_ternary(t)[0, 0]) == 0b01_00_10_01  # first weight in the lowest two bits
    with pytest.raises(ValueError):
        unpack_ternary(torch.tensor([[0b11]], dtype=torch.uint8), 1)
    with pytest.raises(ValueError):
        pack_ternary(torch.tensor([[2]], dtype=torch.int8))


@pytest.mark.parametrize("n", [1, 2, 9])
def test_int4_pack_roundtrip(n):
    q = torch.randint(-8, 8, (4, n), generator=torch.Generator().manual_seed(1)).to(torch.int8)
    assert torch.equal(unpack_int4(pack_int4(q), n), q)


def _corr_inputs(n, N=400, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g) / n**0.5 + torch.eye(n)
    X = torch.randn(N, n, generator=g) @ A + 0.5
    return X, (X.T @ X / N).to(torch.float64)


def test_quantize_pack_unpack_dequantize_exact():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(24, 70, generator=g) * 0.05
    _, H = _corr_inputs(70)
    for rec in (e2m_gptq(W, H, block=32), rtn_ternary(W)):
        fake = rec.dequant()
        t = unpack_ternary(pack_ternary(rec.t), W.shape[1])
        rebuilt = ternary_dequant(t, rec.mu.to(torch.float16), rec.alpha.to(torch.float16), rec.block)
        assert torch.equal(rebuilt, fake)
    r4 = rtn_int4(W)
    assert torch.equal(int4_dequant(unpack_int4(pack_int4(r4.q), 70), r4.scale.to(torch.float16)), r4.dequant())


def test_saved_model_rebuilds_exactly_and_bpw_matches_formula(tiny_llama, tmp_path):
    from paperflow.quantization.kotms import learn_kotms
    from paperflow.quantization.qmodel import qlinears
    from paperflow.quantization.store import load_quantized, save_quantized

    model = tiny_llama
    base = tmp_path / "base"
    model.config.save_pretrained(base)
    records = {}
    for name, lin in qlinears(model).items():
        C, B, _ = learn_kotms(lin.weight, iters=3)
        lin.set_rotation(C, B)
        rec = rtn_ternary(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = model(ids).logits
    mem = save_quantized(tmp_path / "q", model, records, base, "test")
    re, meta = load_quantized(tmp_path / "q")
    for name, lin in qlinears(re).items():
        assert torch.equal(lin.weight, qlinears(model)[name].weight)
    with torch.no_grad():
        assert torch.equal(re(ids).logits, ref)
    # the skeleton is not randomly initialised (issue 24): every parameter and buffer is the packed dir's
    inited, _ = load_quantized(tmp_path / "q", init_weights=True)
    a, b = dict(re.named_parameters()) | dict(re.named_buffers()), dict(inited.named_parameters()) | dict(inited.named_buffers())
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    qj = json.loads((tmp_path / "q" / "quant.json").read_text())
    gone = next(iter(qj["layers"]))
    del qj["layers"][gone]
    (tmp_path / "q" / "quant.json").write_text(json.dumps(qj))
    with pytest.raises(ValueError, match="linears not in quant.json"):  # it would be left uninitialised
        load_quantized(tmp_path / "q")
    # true bits per weight: 2-bit codes (rows padded to 4) + fp16 mu/alpha per row + fp32 rotations
    bits, nw = 0, 0
    for name, info in meta["layers"].items():
        m, n = info["shape"]
        bits += 2 * m * 4 * ((n + 3) // 4)  # 2 bits per (padded) weight
        bits += 16 * m * 1 * 2  # one block per row (RTN per-row), mu + alpha
        bits += 32 * (info["l"] ** 2 + info["r"] ** 2)
        nw += m * n
    assert mem["bpw_linear"] == pytest.approx(bits / nw)
    assert json.loads((tmp_path / "q" / "memory.json").read_text())["n_linear_weights"] == nw


def test_memory_json_reports_the_file_as_stored(tiny_llama, tmp_path):
    """memory.json counts the bytes actually written: FP params (embeddings, norms) are stored in fp32,
    and the whole-model figure is the file's own size, not an fp16 estimate."""
    from safetensors.torch import load_file

    from paperflow.quantization.qmodel import qlinears
    from paperflow.quantization.store import save_quantized

    base = tmp_path / "base"
    tiny_llama.config.save_pretrained(base)
    records = {}
    for name, lin in qlinears(tiny_llama).items():
        records[name] = rtn_ternary(lin.weight)
        lin.weight = records[name].dequant()
    mem = save_quantized(tmp_path / "q", tiny_llama, records, base, "rtn_ternary")
    f = tmp_path / "q" / "quantized.safetensors"
    stored = load_file(str(f))
    nbytes = {k: v.numel() * v.element_size() for k, v in stored.items()}
    assert mem["file_bytes"] == f.stat().st_size
    assert mem["tensor_bytes"] == sum(nbytes.values()) < mem["file_bytes"]  # + the safetensors header
    fp = {k: v for k, v in stored.items() if k.startswith("fp.")}
    assert {str(v.dtype) for v in fp.values()} == {"torch.float32"} and mem["fp_other_dtypes"] == ["float32"]
    assert mem["bytes"]["fp_other"] == sum(nbytes[k] for k in fp) == 4 * mem["n_other_params"]
    assert mem["bytes"]["codes"] == sum(n for k, n in nbytes.items() if k.endswith(".codes"))
    n_all = mem["n_linear_weights"] + mem["n_other_params"]
    assert mem["bpw_model"] == pytest.approx(8 * f.stat().st_size / n_all)
    assert json.loads((tmp_path / "q" / "memory.json").read_text()) == json.loads(json.dumps(mem))
