"""Metrics on hand-made score maps: an oracle map scores perfectly, a constant one sits at chance."""

from __future__ import annotations

import numpy as np
import torch

from paperflow.expalign import evaluate as ev


class _Oracle(torch.nn.Module):
    """S_p = object mask of phrase p (at grid resolution) — or a constant map."""

    def __init__(self, split, P, const=False):
        super().__init__()
        g = ev.cell_overlap(split, 8, 8).float()
        S = torch.zeros(len(split.images), P, 8, 8)
        if not const:
            S[torch.from_numpy(split.inst_image), torch.from_numpy(split.inst_cat)] = g * (1 + torch.rand(g.shape) * 0.1)
        self.S = S
        self.i = 0

    def forward(self, images, txt):
        out = self.S[self.i:self.i + len(images)]
        self.i += len(images)
        return out


def _run(split, cats, const):
    model = _Oracle(split, len(cats), const)
    m, _ = ev.evaluate(model, split, {}, cats, rho=0.01, pooling="topk", box_threshold=0.5, phrases_per_image=10)
    return m


def test_oracle_map_is_perfect_and_constant_map_at_chance(splits):
    _, te, cats = splits
    good = _run(te, cats, const=False)
    assert good["pointing"]["acc"]["all"] == 1.0
    assert good["phrase_map"]["map"]["all"] == 1.0
    assert good["attribute_swap"]["both"]["all"] == 1.0
    assert good["box"]["ap50"]["all"] > 0.8  # boxes of cell-resolution masks, IoU >= 0.5 with the pixel boxes
    flat = _run(te, cats, const=True)
    # argmax of a constant map is cell 0: chance-level pointing; ties never count as swap wins
    assert flat["pointing"]["acc"]["all"] < 0.3 and flat["attribute_swap"]["both"]["all"] == 0.0
    assert 0 < flat["pointing"]["chance"]["all"] < 0.3
    assert {"seen", "rare"} <= set(good["pointing"]["acc"])


def test_swap_pairs_differ_in_one_attribute(splits):
    _, _, cats = splits
    pairs = ev.swap_pairs(cats)
    for kind, other in (("colour", "shape"), ("shape", "colour")):
        for i, j in pairs[kind][:50]:
            assert cats[i][kind] != cats[j][kind] and cats[i][other] == cats[j][other]
            assert cats[i]["size"] == cats[j]["size"]
    assert len(pairs["colour"]) == 60 * 5 and len(pairs["shape"]) == 60 * 4
    assert np.isfinite(len(pairs["colour"]))


def test_evaluate_stage_matches_models_to_arms_by_path_not_order(splits, tmp_path):
    """The rule lists model files in config order, --params holds arms in sorted order: files must be
    matched by their arm directory (a sentence-head file loaded into a token head would fail or, worse,
    score the wrong model)."""
    from safetensors.numpy import save_file

    from paperflow.core.checkpoint import save_weights
    from paperflow.core.config import validate_config
    from paperflow.core.io import write_json
    from paperflow.expalign import plan
    from paperflow.expalign.data import save_split
    from paperflow.expalign.stages import evaluate
    from paperflow.expalign.train import build_model
    from tests.expalign.conftest import fake_text

    _, te, cats = splits
    cfg = validate_config({"expalign": {"enabled": True, "model": {"dim": 8, "width": 4},
                                        "arms": {"Z": {"head": "sentence"}, "B": {"head": "max"}}}})["expalign"]
    test, meta, text = tmp_path / "test.safetensors", tmp_path / "meta.json", tmp_path / "text.safetensors"
    save_split(test, te)
    write_json(meta, {"categories": cats})
    save_file({f"plain.{k}": v for k, v in fake_text(len(cats)).items()}, str(text))
    models = []
    for arm in ("Z", "B"):  # config order; the params JSON sorts them to B, Z
        p = plan.train_params(cfg, arm, 0)
        path = tmp_path / "m" / arm / "s0" / "model.safetensors"
        save_weights(path, build_model(p, 24))
        models.append(path)
    res = evaluate(plan.eval_params(cfg, 0), test=test, meta=meta, text=text, models=models[::-1],
                   out=tmp_path / "s0.json")
    assert set(res["arms"]) == {"B", "Z"}
