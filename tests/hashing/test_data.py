"""Loader of the official .mat layouts, read back from packs our generator writes."""

import numpy as np
import pytest
import scipy.io as sio

from paperflow.hashing.data import DataError, generate_single, load_pack, load_split, save_split, write_synthetic_mat

P = dict(seed=0, n_classes=8, classes_per_super=4, n_train=160, n_test=600, n_query_ml=50, n_database_ml=300,
         ml_label_counts_p=[0.5, 0.35, 0.15], latent_dim=8, private_dim=4, sigma_super=3.0, sigma_class=1.5,
         sigma_w=1.0, d_img=20, d_txt=15, img_noise=0.3, txt_offset=2.0)


def test_xmedia_layout_roundtrip(tmp_path):
    arrays = write_synthetic_mat(tmp_path / "x.mat", "xmedia", P)
    splits, meta = load_pack(tmp_path / "x.mat", "xmedia")
    assert meta["label_base"] == 1 and meta["n_classes"] == 8
    assert meta["sizes"] == {"train": 160, "val": 500, "query": 100, "database": 100}
    # val is the first 500 rows of the pack's test split, test the rest
    assert np.allclose(splits["val"]["img"], arrays["I_te_CNN"][:500])
    assert np.array_equal(splits["query"]["labels"].argmax(1), arrays["teImgCat"][500:, 0].astype(int) - 1)
    assert np.array_equal(splits["query"]["ids"], np.arange(500, 600))
    tr = splits["train"]
    assert tr["img"].dtype == np.float32 and tr["labels"].dtype == np.uint8
    assert np.all(tr["img"] >= 0)  # CNN-like (ReLU)
    assert np.allclose(np.linalg.norm(tr["txt"], axis=1), 1, atol=1e-5)  # L2-normalised BoW
    assert np.all(np.bincount(tr["labels"].argmax(1)) == 20)  # class-balanced
    save_split(tmp_path / "t.npz", tr)
    back = load_split(tmp_path / "t.npz", with_labels=False)
    assert "labels" not in back and np.array_equal(back["img"], tr["img"])


def test_zero_based_pack_and_class_assertions(tmp_path):
    a = generate_single(P)
    a["trImgCat"] = a["trImgCat"] - 1
    a["teImgCat"] = a["teImgCat"] - 1
    sio.savemat(tmp_path / "z.mat", a)
    splits, meta = load_pack(tmp_path / "z.mat", "xmedia")
    assert meta["label_base"] == 0 and meta["n_classes"] == 8
    a["trImgCat"][a["trImgCat"] == 3] = 4  # class 3 missing from train
    sio.savemat(tmp_path / "m.mat", a)
    with pytest.raises(DataError, match="lacks classes \\[3\\]"):
        load_pack(tmp_path / "m.mat", "xmedia")


def test_inria_alt_keys_and_missing_key_message(tmp_path):
    rng = np.random.default_rng(0)
    d = {}
    for s, n in (("train", 30), ("valid", 10), ("test", 12)):
        d[f"img_{s}"] = rng.random((n, 6))
        d[f"text_{s}"] = rng.random((n, 4))
        d[f"label_{s}"] = (np.arange(n) % 3)[:, None].astype(float)
    sio.savemat(tmp_path / "i.mat", d)
    splits, meta = load_pack(tmp_path / "i.mat", "inria")
    assert meta["sizes"] == {"train": 30, "val": 10, "query": 12, "database": 12} and meta["label_base"] == 0
    del d["text_valid"]
    sio.savemat(tmp_path / "j.mat", d)
    with pytest.raises(DataError, match=r"j\.mat: key 'text_valid' missing"):
        load_pack(tmp_path / "j.mat", "inria")


def test_multilabel_layout_train_val_from_database(tmp_path):
    write_synthetic_mat(tmp_path / "ml.mat", "ml_dbtest", {**P, "n_classes": 24, "classes_per_super": 4})
    splits, meta = load_pack(tmp_path / "ml.mat", "ml_dbtest", n_train_ml=200, n_val_ml=50)
    assert meta["multilabel"] and meta["n_classes"] == 24
    assert meta["sizes"] == {"train": 200, "val": 50, "query": 50, "database": 300}
    assert not set(splits["train"]["ids"]) & set(splits["val"]["ids"])
    assert np.array_equal(splits["train"]["labels"], splits["database"]["labels"][splits["train"]["ids"]])
    counts = splits["database"]["labels"].sum(1)
    assert counts.min() >= 1 and counts.max() <= 3


def test_unreadable_pack_named(tmp_path):
    (tmp_path / "bad.mat").write_bytes(b"not a mat file at all")
    with pytest.raises(DataError, match="bad.mat"):
        load_pack(tmp_path / "bad.mat", "xmedia")
