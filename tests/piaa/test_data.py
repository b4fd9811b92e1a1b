"""The list-form loader (the same code for real VOC/COCO/NUS-WIDE lists and the synthetic scenes), the
generator, and bad input: a list naming a missing image or an unknown label fails with the record's name
and leaves no output behind."""

from __future__ import annotations

import numpy as np
import pytest

from paperflow.piaa import data as D

GEN = {"seed": 0, "n_train": 8, "n_test": 6, "image_size": 16, "patch_size": 4, "max_objects": 3,
       "max_area_patches": 8, "area_alpha": 1.0, "context_corr": 0.7}
PREP = {"image_size": 16, "patch_size": 4, "image_ext": ".png", "max_objects": 3, "source_size": 16}


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    out = tmp_path_factory.mktemp("piaa_raw") / "raw"
    D.generate(GEN, out)
    return out


def paths(raw):
    return {"img_root": raw / "images", "train_list": raw / "train_labels.txt", "test_list": raw / "test_labels.txt",
            "classes_file": raw / "classes.txt", "objects": raw / "objects.jsonl"}


def test_generate_and_read_back(raw, tmp_path):
    lines = (raw / "train_labels.txt").read_text().split("\n")
    assert lines[0].split()[0] == "train_000000" and len([ln for ln in lines if ln]) == 8
    stats = D.prepare(PREP, out=tmp_path / "prep", **paths(raw))
    arrays, meta = D.load_prepared(tmp_path / "prep")
    assert stats["n_train"] == 8 and stats["n_test"] == 6 and len(meta["classes"]) == 12
    assert arrays["train_images"].shape == (8, 16, 16, 3) and arrays["train_images"].dtype == np.uint8
    ids, y = D.read_list(raw / "train_labels.txt", 12)
    assert np.array_equal(arrays["train_labels"], y)
    assert ((arrays["test_area"] > 0) == arrays["test_labels"].astype(bool)).all()  # area for every positive only
    own, oc = arrays["test_patch_owner"], arrays["test_object_class"]
    assert own.shape == (6, 16) and own.max() < 3 and (own >= -1).all()
    for n in range(6):  # an owned patch belongs to a listed object whose class is a label of the image
        for j in np.unique(own[n][own[n] >= 0]):
            assert arrays["test_labels"][n, oc[n, j]] == 1
    # deterministic: same seed, same bytes
    again = tmp_path / "raw2"
    D.generate(GEN, again)
    assert (again / "objects.jsonl").read_text() == (raw / "objects.jsonl").read_text()


def test_real_list_format_with_jpgs_of_different_sizes(tmp_path):
    from PIL import Image

    (tmp_path / "JPEGImages").mkdir()
    for iid, size in (("000001", (40, 30)), ("000002", (17, 23))):
        Image.fromarray(np.full((size[1], size[0], 3), 120, np.uint8)).save(tmp_path / "JPEGImages" / f"{iid}.jpg")
    (tmp_path / "list.txt").write_text("000001 11 14\n000002 0\n")
    split = D.load_split(tmp_path / "JPEGImages", tmp_path / "list.txt", 20, image_size=16, ext=".jpg")
    assert split.images.shape == (2, 16, 16, 3) and split.ids == ["000001", "000002"]
    assert split.labels[0, [11, 14]].tolist() == [1, 1] and split.labels[0].sum() == 2 and split.labels[1, 0] == 1


@pytest.mark.parametrize("case", ["missing_image", "unknown_label", "bad_token", "duplicate"])
def test_bad_input_names_the_record_and_writes_nothing(raw, tmp_path, case):
    import shutil

    bad = tmp_path / "raw"
    shutil.copytree(raw, bad)
    lst = bad / "test_labels.txt"
    lines = lst.read_text().splitlines()
    if case == "missing_image":
        (bad / "images" / "test_000003.png").unlink()
        want = "record 'test_000003': image"
    elif case == "unknown_label":
        lines[2] = lines[2] + " 12"
        want = "record 'test_000002': unknown label 12"
    elif case == "bad_token":
        lines[1] = lines[1] + " cat"
        want = "record 'test_000001': label 'cat'"
    else:
        lines.append(lines[0])
        want = "listed twice"
    lst.write_text("\n".join(lines) + "\n")
    out = tmp_path / "prep"
    with pytest.raises(D.DataError, match=want):
        D.prepare(PREP, out=out, **paths(bad))
    assert not out.exists() and not list(tmp_path.glob(".prep*"))
