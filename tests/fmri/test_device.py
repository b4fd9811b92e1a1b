"""Device plumbing of the MAE without a GPU (CPU-only tests; nothing here runs on CUDA).

CUDA refuses a CPU `torch.Generator` for a CUDA tensor; the `meta` device does not, so
`strict_rand` below re-adds that check to stand in for a GPU. Half-precision autocast is exercised
with bf16 on the CPU (the GPU run uses fp16; the dtype clash it causes is the same)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from paperflow.fmri.model import MAE, draw_visible, n_visible


def _model(valid, **kw):
    torch.manual_seed(0)
    return MAE(valid.shape[0], valid.shape[1], valid, n_frames=8, dim=16, depth=1, heads=2, dec_dim=16, dec_depth=1,
               dec_heads=2, **kw)


def _valid():
    valid = np.random.default_rng(0).random((20, 9)) < 0.7
    valid[:5] = False  # background patches
    return valid


def _old_draw(m, B, g):
    """The draw before device handling (CPU): rand on the model's device, background -> 2.0, argsort."""
    noise = torch.rand(B, m.P, generator=g).masked_fill(~m.nonempty, 2.0)
    return noise.argsort(dim=1)[:, :n_visible(m.P, m.mask_ratio)]


def test_cpu_masks_and_rng_stream_unchanged():
    m = _model(_valid())
    g_old, g_new = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    for B in (1, 5, 64):
        assert torch.equal(m.sample_visible(B, g_new), _old_draw(m, B, g_old))
    assert torch.equal(torch.rand(3, generator=g_new), torch.rand(3, generator=g_old))  # same amount consumed
    # without a generator: the global CPU stream, as before
    torch.manual_seed(3)
    a = m.sample_visible(4)
    torch.manual_seed(3)
    assert torch.equal(a, _old_draw(m, 4, None))
    idx = draw_visible(6, m.nonempty, 3, torch.Generator().manual_seed(1))
    assert idx.device.type == "cpu" and idx.shape == (6, 3) and bool(m.nonempty[idx].all())


@pytest.fixture
def strict_rand(monkeypatch):
    real = torch.rand

    def rand(*size, generator=None, device=None, **kw):
        dev = torch.device(device) if device is not None else torch.get_default_device()
        if generator is not None and generator.device.type != dev.type:
            raise RuntimeError(f"generator on {generator.device} for a tensor on {dev} (as CUDA refuses)")
        return real(*size, generator=generator, device=device, **kw)

    monkeypatch.setattr(torch, "rand", rand)


def test_masks_from_a_cpu_generator_land_on_the_model_device(strict_rand):
    m = _model(_valid())
    cpu = m.sample_visible(8, torch.Generator().manual_seed(0))
    # stands in for "cuda": the model's device (read from `valid`) is not the generator's. `nonempty`
    # stays readable on the CPU (a meta tensor has no data; a CUDA one copies back fine).
    m.valid = m.valid.to("meta")
    vis = m.sample_visible(8, torch.Generator().manual_seed(0))
    assert vis.device.type == "meta" and vis.shape == cpu.shape and vis.dtype == cpu.dtype


def test_forward_under_half_precision_autocast():
    """On CUDA pretrain runs under fp16 autocast: decoder tokens in half precision are scattered into
    the float32 mask-token grid."""
    m = _model(_valid())
    x = torch.randn(2, 8, 20, 9) * torch.from_numpy(_valid()).float()
    ref = m(x, generator=torch.Generator().manual_seed(0))[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, pred, visible = m(x, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(loss) and visible.shape == (2, 20)
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=0.05)


def test_forward_creates_nothing_on_the_default_device():
    """Every tensor the model makes follows its inputs/parameters, not torch's default device."""
    m = _model(_valid())
    x = torch.randn(2, 8, 20, 9)
    ref = m(x, generator=torch.Generator().manual_seed(0))
    with torch.device("meta"):
        out = m(x, generator=torch.Generator().manual_seed(0))
        h = m.encode(x)
    assert all(t.device.type == "cpu" for t in (*out, h))
    assert torch.equal(out[0], ref[0]) and torch.equal(out[2], ref[2])


def test_load_model_device_and_embed_outputs(monkeypatch):
    from paperflow.fmri import train

    valid = _valid()
    proj = SimpleNamespace(n_patches=20, patch_size=9, valid_mask=lambda: valid,
                           to_patches=lambda c: c.reshape(c.shape[0], 20, 9))
    p = {"seed": 0, "clip_frames": 8, "mask_ratio": 0.9,
         "model": {"t_patch": 4, "dim": 16, "depth": 1, "heads": 2, "dec_dim": 16, "dec_depth": 1, "dec_heads": 2}}
    monkeypatch.setattr("paperflow.core.accel.cuda_available", lambda: False)
    cpu = train.load_model(proj, None, p)
    assert next(cpu.parameters()).device.type == "cpu" and not cpu.training
    meta = train.load_model(proj, None, p, device="meta")
    assert next(meta.parameters()).device.type == "meta"
    runs = [np.random.default_rng(i).standard_normal((20, 180)).astype(np.float32) for i in range(3)]
    cls_o, tok_o = train.embed_runs(cpu, proj, runs, 8)
    assert cls_o.shape == (3, 16) and tok_o.shape == (3, 16) and np.isfinite(cls_o).all()
