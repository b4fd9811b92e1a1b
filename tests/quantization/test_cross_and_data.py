import gzip
import json

import torch

from paperflow.lm.corpus import read_split, split_of
from paperflow.quantization.cross_unlearning import quantize_checkpoint, recovery, rtn_codes
from paperflow.quantization.data import consecutive, windows


def test_rtn_codes_levels():
    W = torch.randn(6, 300, generator=torch.Generator().manual_seed(0))
    q8, w8 = rtn_codes(W, "rtn_w8")
    assert int(q8.to(torch.int16).abs().max()) <= 128 and (w8 - W).abs().max() < W.abs().max() / 127
    q4, w4 = rtn_codes(W, "rtn_w4")
    for g0 in range(0, 300, 128):  # per row and 128-column group: at most 16 levels
        for row in w4[:, g0:g0 + 128]:
            assert len(torch.unique(row)) <= 16
    t, wt = rtn_codes(W, "rtn_ternary")
    assert set(t.unique().tolist()) <= {-1, 0, 1}


def test_recovery_ratio_guard():
    assert recovery(0.5, 0.1, 0.9) == (0.5 - 0.1) / (0.9 - 0.1)
    assert recovery(0.5, 0.1, 0.12) is None  # denominator ≤ 0.05


def test_quantize_checkpoint_bin_agreement(tiny_llama, tmp_path):
    from transformers import LlamaForCausalLM

    from paperflow.quantization.qmodel import qlinears

    # plain HF checkpoint (unwrap QLinear -> Linear via a fresh model with the same weights)
    m = LlamaForCausalLM(tiny_llama.config).eval()
    m.save_pretrained(tmp_path / "orig")
    st = quantize_checkpoint(tmp_path / "orig", tmp_path / "orig", "rtn_w4", tmp_path / "q")
    assert st["bin_agreement_with_original"] == 1.0 and st["rel_update_vs_original"] == 0.0
    q = LlamaForCausalLM.from_pretrained(tmp_path / "q").eval()
    W = q.model.layers[0].mlp.down_proj.weight
    assert torch.equal(W, rtn_codes(m.model.layers[0].mlp.down_proj.weight, "rtn_w4")[1])
    assert not qlinears(q)


def test_corpus_reader_formats_and_split(tmp_path):
    (tmp_path / "wiki.test.raw").write_text(" = a = \n\nhello world\n")
    assert "hello world" in read_split(tmp_path, "test")
    with gzip.open(tmp_path / "valid.jsonl.gz", "wt") as f:
        f.write(json.dumps({"text": "doc one"}) + "\n" + json.dumps({"text": "doc two"}) + "\n")
    assert read_split(tmp_path, "valid", "jsonl") == "doc one\n\ndoc two"
    assert split_of("json.decoder") == split_of("json.decoder")
    names = [f"mod{i}" for i in range(2000)]
    frac = sum(split_of(n) == "train" for n in names) / len(names)
    assert 0.85 < frac < 0.95


def test_windows_use_the_right_split():
    tokens = {"train": torch.arange(0, 1000, dtype=torch.int32), "valid": torch.arange(1000, 1300, dtype=torch.int32),
              "test": torch.arange(2000, 2500, dtype=torch.int32)}
    d = {"seq_len": 50, "calib_windows": 4, "lac_windows": 2, "sens_windows": 3, "check_windows": 1, "test_windows": None}
    assert windows(tokens, d, "test").shape == (10, 50) and windows(tokens, d, "test").min() >= 2000
    assert windows(tokens, d, "sens").max() < 1300 and windows(tokens, d, "sens").min() >= 1000
    c0, c1 = windows(tokens, d, "calib", 0), windows(tokens, d, "calib", 1)
    assert c0.max() < 1000 and not torch.equal(c0, c1) and torch.equal(c0, windows(tokens, d, "calib", 0))
    assert consecutive(tokens["test"], 50, 3).shape == (3, 50)
