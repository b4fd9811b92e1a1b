"""Generator -> COCO JSON -> loader round trip, and the loader's errors on bad input."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from paperflow.expalign.data import DataError, load_coco


def test_round_trip_masks_boxes_and_rare_split(synth_dir, splits):
    from pycocotools import mask as mask_utils

    tr, te, cats = splits
    coco = json.loads((synth_dir / "annotations_train.json").read_text())
    a = coco["annotations"][0]
    m = mask_utils.decode(a["segmentation"])
    assert m.sum() == a["area"] and m.shape == (32, 32)
    x, y, w, h = a["bbox"]
    ys, xs = np.nonzero(m)
    assert (xs.min(), ys.min(), xs.max() + 1 - xs.min(), ys.max() + 1 - ys.min()) == (x, y, w, h)
    rare = np.array([c["frequency"] == "r" for c in cats])
    assert rare.sum() == 12 and len(cats) == 60  # 20% of 6 x 5 combinations, both sizes
    assert not tr.pos[:, rare].any() and te.pos[:, rare].any()  # rare combinations never positive in training
    assert not (tr.pos & tr.neg).any() and (tr.pos | tr.neg).all()  # synthetic labels are exhaustive
    assert len(tr.inst_cat) == len(coco["annotations"])
    k = 0
    assert tr.inst_mask[k].sum() == a["area"] and tr.pos[tr.inst_image[k], tr.inst_cat[k]]


def _corrupt(src, dst, fn):
    dst.mkdir()
    for f in src.iterdir():
        shutil.copy(f, dst / f.name)
    p = dst / "annotations_train.json"
    d = json.loads(p.read_text())
    fn(d)
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("name,fn,pattern", [
    ("box_outside", lambda d: d["annotations"][3].update(bbox=[20.0, 20.0, 15.0, 4.0]),
     r"annotation id 4 \(image id \d+\): bbox .* outside"),
    ("unknown_cat", lambda d: d["annotations"][5].update(category_id=999),
     r"annotation id 6 \(image id \d+\) has unknown category_id 999"),
    ("missing_image", lambda d: d["images"][7].update(array_index=10_000),
     r"image id 8 \(train_000007.png\) is missing from the image array"),
    ("orphan_annotation", lambda d: d["annotations"][0].update(image_id=55_555),
     r"annotation id 1 refers to image id 55555"),
])
def test_bad_input_names_the_record_and_writes_nothing(synth_dir, tmp_path, name, fn, pattern):
    from paperflow.expalign.stages import prep

    p = _corrupt(synth_dir, tmp_path / name, fn)
    out = tmp_path / "out"
    with pytest.raises(DataError, match=pattern):
        prep({"source": "synthetic", "image_size": 32, "max_train_images": None, "max_val_images": None,
              "max_test_images": None},
             train_json=p, train_images=p.parent / "images_train.npy", val_json=p.parent / "annotations_val.json",
             val_images=p.parent / "images_val.npy", test_json=p.parent / "annotations_test.json",
             test_images=p.parent / "images_test.npy", outdir=out)
    assert not out.exists() or not any(out.iterdir())


def test_real_image_directory_and_missing_file(tmp_path):
    """COCO layout with image files: a missing file is named; LVIS negatives come from neg_category_ids."""
    from PIL import Image

    (tmp_path / "img").mkdir()
    Image.fromarray(np.full((40, 20, 3), 128, np.uint8)).save(tmp_path / "img" / "a.png")
    d = {"images": [{"id": 1, "file_name": "a.png", "width": 20, "height": 40, "neg_category_ids": [2]}],
         "categories": [{"id": 1, "name": "red_ball", "frequency": "r"}, {"id": 2, "name": "cat", "frequency": "f"},
                        {"id": 3, "name": "dog", "frequency": "c"}],
         "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 4, 10, 20], "area": 200,
                          "segmentation": [[2, 4, 12, 4, 12, 24, 2, 24]], "iscrowd": 0}]}
    p = tmp_path / "lvis.json"
    p.write_text(json.dumps(d))
    s, cats = load_coco(p, images=tmp_path / "img", image_size=16)
    assert [c["phrase"] for c in cats] == ["red ball", "cat", "dog"] and cats[0]["frequency"] == "r"
    assert s.pos[0].tolist() == [True, False, False] and s.neg[0].tolist() == [False, True, False]  # dog: ignored
    np.testing.assert_allclose(s.inst_box[0], [1.6, 1.6, 8.0, 8.0])  # rescaled to 16 x 16
    assert s.inst_mask[0].sum() > 0
    d["images"][0]["file_name"] = "gone.png"
    p.write_text(json.dumps(d))
    with pytest.raises(DataError, match=r"image id 1: file .*gone.png does not exist"):
        load_coco(p, images=tmp_path / "img", image_size=16)
