"""Validation split (generator + the one loader) and the knob selection that reads it, never test."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from paperflow.expalign import select


def test_val_split_is_held_out_from_the_training_stream(synth_dir):
    """The generator writes val in the COCO layout; the loader reads it like any split; val images are the
    training stream's tail (train images independent of n_val) and carry no rare combination."""
    from paperflow.expalign.data import SynthCfg, load_coco, render_split

    tr, cats = load_coco(synth_dir / "annotations_train.json", images=synth_dir / "images_train.npy", image_size=32)
    va, _ = load_coco(synth_dir / "annotations_val.json", images=synth_dir / "images_val.npy", image_size=32,
                      phrases=[c["phrase"] for c in cats])
    cfg = SynthCfg(n_train=64, n_val=16, n_test=32, seed=3)  # the fixture's config
    assert len(tr.images) == 64 and len(va.images) == cfg.n_val
    _, stream = render_split(cfg, "train", 64 + 8)
    np.testing.assert_array_equal(tr.images, stream[:64])
    np.testing.assert_array_equal(va.images[:8], stream[64:72])
    rare = np.array([c["frequency"] == "r" for c in cats])
    assert va.pos.any() and not va.pos[:, rare].any() and len(va.inst_cat) > 0
    coco = json.loads((synth_dir / "annotations_val.json").read_text())
    assert coco["images"][0]["id"] == 1 and coco["images"][0]["file_name"] == "val_000000.png"
    assert {a["image_id"] for a in coco["annotations"]} <= {im["id"] for im in coco["images"]}


def test_prep_writes_val_and_refuses_val_sharing_test_images(synth_dir, tmp_path):
    from paperflow.expalign.data import DataError, read_split
    from paperflow.expalign.stages import prep

    p = {"source": "synthetic", "image_size": 32, "max_train_images": None, "max_val_images": 10,
         "max_test_images": None}
    files = {f"{s}_{k}": synth_dir / f"{n}_{s}.{e}" for s in ("train", "val", "test")
             for k, n, e in (("json", "annotations", "json"), ("images", "images", "npy"))}
    meta = prep(p, **files, outdir=tmp_path / "ok")
    assert meta["n_val"] == 10 and len(read_split(tmp_path / "ok" / "val.safetensors").images) == 10
    bad = {**files, "val_json": files["test_json"], "val_images": files["test_images"]}
    with pytest.raises(DataError, match="must be disjoint"):
        prep(p, **bad, outdir=tmp_path / "bad")
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").iterdir())


def test_pick_is_the_argmax_first_on_ties_and_refuses_nan():
    rows = [{"cell": {"steps": 200, "lr": 1e-3}, "score": 0.70},
            {"cell": {"steps": 200, "lr": 3e-3}, "score": 0.81},
            {"cell": {"steps": 300, "lr": 1e-3}, "score": 0.64},
            {"cell": {"steps": 300, "lr": 3e-3}, "score": 0.81}]
    assert select.pick(rows)["cell"] == {"steps": 200, "lr": 3e-3}
    assert select.pick(rows[2:3])["cell"] == {"steps": 300, "lr": 1e-3}
    # equal hit counts (898 + 839 = 884 + 853 of 956 pairs each) whose float means differ in the last bit
    tie = [{"cell": {"steps": 300}, "score": (898 / 956 + 839 / 956) / 2},
           {"cell": {"steps": 400}, "score": (884 / 956 + 853 / 956) / 2}]
    assert tie[1]["score"] > tie[0]["score"] and select.pick(tie)["cell"] == {"steps": 300}
    with pytest.raises(ValueError, match="no finite score"):
        select.pick(rows + [{"cell": {"steps": 400, "lr": 1e-3}, "score": math.nan}])
    cells = select.grid({"steps": [200, 300], "lr": [1e-3, 3e-3]})
    assert cells[1] == {"steps": 200, "lr": 3e-3} and len(cells) == 4
    with pytest.raises(ValueError, match="not selectable"):
        select.with_knobs({"train": {}}, {"batch_size": 8})


def test_selection_reads_val_never_test(synth_dir, tmp_path, monkeypatch):
    """A 2-cell grid on the fixture's data, with test.safetensors absent: every split read is train or val,
    the rows carry each arm's val pointing and the choice is their argmax."""
    from safetensors.numpy import save_file

    from paperflow.core.config import validate_config
    from paperflow.core.io import write_json
    from paperflow.expalign import data as D
    from paperflow.expalign.stages import prep

    from .conftest import fake_text

    files = {f"{s}_{k}": synth_dir / f"{n}_{s}.{e}" for s in ("train", "val", "test")
             for k, n, e in (("json", "annotations", "json"), ("images", "images", "npy"))}
    d = tmp_path / "data"
    meta = prep({"source": "synthetic", "image_size": 32, "max_train_images": None, "max_val_images": None,
                 "max_test_images": None}, **files, outdir=d)
    (d / "test.safetensors").unlink()
    write_json(d / "meta.json", meta)
    t = fake_text(len(meta["phrases"]))
    save_file({f"plain.{k}": v for k, v in t.items()}, str(d / "text.safetensors"))
    read: list[str] = []
    orig = D.read_split
    monkeypatch.setattr(D, "read_split", lambda p: read.append(str(p)) or orig(p))
    cfg = validate_config({"expalign": {"enabled": True, "model": {"dim": 8, "width": 4},
                                        "train": {"batch_size": 8},
                                        "selection": {"steps": [2], "lr": [1e-3, 3e-3]}}})["expalign"]
    res = select.run(cfg, d)
    assert read and {Path(p).name for p in read} == {"train.safetensors", "val.safetensors"}
    assert [r["cell"] for r in res["cells"]] == [{"steps": 2, "lr": 1e-3}, {"steps": 2, "lr": 3e-3}]
    for r in res["cells"]:
        assert set(r["val_pointing"]) == {"A", "C"} and 0 <= r["score"] <= 1
        assert r["score"] == pytest.approx(np.mean(list(r["val_pointing"].values())))
    assert res["choice"] == select.pick(res["cells"])["cell"] and res["n_val"] == len(orig(d / "val.safetensors").images)
