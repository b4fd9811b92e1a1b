"""The synthetic interaction world and its loader (the one real data goes through)."""

import json

import numpy as np
import pytest

from paperflow.mi_gate import data as D

P = dict(n=800, type_probs=[0.4, 0.2, 0.2, 0.2], image_dim=16, image_noise=0.5, split=[0.7, 0.15, 0.15], seed=3,
         split_seed=42)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("mi") / "synth"
    records, images = D.generate(P)
    counts = D.write_dataset(out, records, images)
    return out, records, images, counts


def test_roundtrip_and_schema(written):
    out, records, images, counts = written
    ds = D.load_dataset(out / "data.json", out / "image_features.npy")
    assert {s: len(d) for s, d in ds.items()} == counts and sum(counts.values()) == P["n"]
    rec = json.loads((out / "data.json").read_text())[0]
    assert set(rec) == {"id", "original_text", "correct_answer", "split", "latent"}
    assert rec["correct_answer"] in D.LABELS
    tr = ds["train"]
    assert tr.image.shape == (counts["train"], 16) and tr.image.dtype == np.float32
    # the loader's image rows are the records' rows (ids aligned)
    k = int(tr.ids[5])
    assert np.array_equal(tr.image[5], images[k]) and tr.text[5] == records[k]["original_text"]


def test_labels_follow_the_type_rules(written):
    _, records, _, _ = written
    for r in records:
        lat = r["latent"]
        c = D.COLOURS.index(lat["colour"])
        assert D.LABELS.index(r["correct_answer"]) == D.label_of(lat["type"], c, lat["cue"])
        if lat["type"] == "R":
            assert lat["colour"] in r["original_text"]
        else:  # only R text names the colour; U_V text is neutral
            assert not any(col in r["original_text"] for col in D.COLOURS)
    share = np.mean([r["latent"]["type"] == "U_V" for r in records])
    assert 0.35 < share < 0.45


def test_type_is_not_a_feature(written):
    """Image features depend on colour and shape only: same attributes, any type → same noiseless mean."""
    _, records, images, _ = written
    P0 = D.projection(16, P["seed"])
    c = np.array([D.COLOURS.index(r["latent"]["colour"]) for r in records])
    s = np.array([D.SHAPES.index(r["latent"]["shape"]) for r in records])
    resid = images - (np.eye(4)[c] @ P0[:4] + np.eye(4)[s] @ P0[4:])
    assert abs(resid.std() - P["image_noise"]) < 0.05
    types = np.array([D.TYPES.index(r["latent"]["type"]) for r in records])
    means = [resid[types == t].mean() for t in range(4)]
    assert np.ptp(means) < 0.05


def test_split_is_stratified(written):
    _, records, _, _ = written
    y = np.array([D.LABELS.index(r["correct_answer"]) for r in records])
    sp = np.array([r["split"] for r in records])
    for s in D.SPLITS:
        assert abs(y[sp == s].mean() - y.mean()) < 0.06


def test_loader_rejects_bad_files(tmp_path, written):
    out, records, images, _ = written
    np.save(tmp_path / "short.npy", images[:-1])
    with pytest.raises(ValueError, match="does not match"):
        D.load_dataset(out / "data.json", tmp_path / "short.npy")
    bad = [dict(r) for r in records]
    bad[0]["correct_answer"] = "Maybe."
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="unknown correct_answer"):
        D.load_dataset(tmp_path / "bad.json", out / "image_features.npy")
    nolat = [{k: v for k, v in r.items() if k != "latent"} for r in records]
    (tmp_path / "real.json").write_text(json.dumps(nolat))
    ds = D.load_dataset(tmp_path / "real.json", out / "image_features.npy")
    assert ds["train"].types is None  # real data: no latent bookkeeping, still loads


def test_corruptions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 32)).astype(np.float32) * 2
    occ = D.corrupt_image(x, "occlusion", rng)
    assert np.all(occ[:, 16:] == 0) and np.array_equal(occ[:, :16], x[:, :16])
    drop = D.corrupt_image(x, "dropout", rng, 0.5)
    assert 0.45 < np.mean(drop == 0) < 0.55
    rms = np.sqrt(np.mean(x ** 2))
    for k in (1, 2):
        n = D.corrupt_image(x, f"noise{k}", rng) - x
        assert abs(n.std() / rms - k) < 0.05
    assert np.array_equal(D.corrupt_image(x, "clean", rng), x)
    words = D.drop_words(["a b c d e f g h"] * 200, 0.5, rng)
    assert 3.5 < np.mean([len(w.split()) for w in words]) < 4.5


def test_appending_words_changes_the_text_embedding():
    e = D.embed_texts(["is this one good", "is this one good a red square", "is this one good"], 32, 0)
    assert np.array_equal(e[0], e[2]) and not np.allclose(e[0], e[1])
