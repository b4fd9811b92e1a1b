"""The scenes format: written by the generator, read back by the one loader, checked on the way."""

from __future__ import annotations

import numpy as np
import pytest

from paperflow.mpdpac.data import Vocab, load_scenes, write_scenes
from paperflow.mpdpac.metrics import parse_objects, truncate
from tests.mpdpac.conftest import SMALL


def test_roundtrip_and_captions_follow_raster_order(scenes):
    tr, te = load_scenes(scenes, "train"), load_scenes(scenes, "test")
    assert len(tr) == SMALL["n_train"] and len(te) == SMALL["n_test"]
    voc = tr.vocab
    assert voc.tokens[voc.mask] == "[MASK]" and voc.tokens[voc.eos] == "[EOS]"
    for s in (tr, te):
        for i in range(len(s)):
            k = int(s.n_objects[i])
            objs = [tuple(o) for o in s.objects[i, :k].tolist()]
            assert len(set(objs)) == k  # distinct objects: a repeated object in a caption is an error
            # the caption lists the grid's objects in raster order
            cells = [t for t in s.visual[i].tolist() if t != voc.bg]
            assert cells == [voc.visual(c, sh) for c, sh in objs]
            assert parse_objects(truncate(s.answer[i].tolist(), voc.eos), voc) == objs
            assert SMALL["len_min"] <= s.length[i] <= SMALL["len_max"]
            assert (s.answer[i, 3 * k:] == voc.eos).all()
    assert (te.length == SMALL["len_max"]).all()


def test_same_seed_same_file_content(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    write_scenes(SMALL, a, seed=3)
    write_scenes(SMALL, b, seed=3)
    sa, sb = load_scenes(a, "train"), load_scenes(b, "train")
    assert np.array_equal(sa.answer, sb.answer) and np.array_equal(sa.visual, sb.visual)


def test_loader_errors_name_the_file(tmp_path, scenes):
    z = dict(np.load(scenes))
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{k: v for k, v in z.items() if k != "test_answer"})
    with pytest.raises(ValueError, match=r"bad\.npz.*missing keys.*test_answer"):
        load_scenes(bad, "test")
    z2 = dict(z)
    z2["train_visual"] = z["train_visual"].astype(np.int32)
    bad2 = tmp_path / "bad2.npz"
    np.savez(bad2, **z2)
    with pytest.raises(ValueError, match=r"bad2\.npz.*train_visual.*int32"):
        load_scenes(bad2, "train")
    with pytest.raises(ValueError, match="unknown split"):
        load_scenes(scenes, "val")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"junk\.npz"):
        load_scenes(junk, "train")


def test_vocab_ids_are_disjoint():
    v = Vocab(6, 6)
    ids = [v.colour(c) for c in range(6)] + [v.shape(s) for s in range(6)] + [
        v.visual(c, s) for c in range(6) for s in range(6)]
    assert len(set(ids)) == len(ids) == 48 and max(ids) == len(v) - 1 and min(ids) == 5
