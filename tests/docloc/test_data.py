"""DocVQA-format generator and loader: round trip, the spec's page structure, clear errors on bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from paperflow.docloc.data import DataError, featurise, line_values, load_split, write_synthetic

CFG = {"grid": 32, "sections": [3, 4], "blocks": [10, 16], "distractors": [3, 5], "distractors_ood": [6, 8],
       "distractor_other_section": 0.8, "vocab_size": 60, "n_headers": 12, "n_train": 6, "n_val": 2, "n_test": 4}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    root = tmp_path_factory.mktemp("docloc") / "synth"
    counts = write_synthetic(root, CFG, seed=0)
    return root, counts


def test_roundtrip_and_docvqa_fields(synth):
    root, counts = synth
    assert counts == {"train": 6, "val": 2, "test_id": 4, "test_ood": 4}
    ann = json.loads((root / "test_id.json").read_text())
    assert {"dataset_name", "dataset_split", "data"} <= ann.keys()
    rec = ann["data"][0]
    assert {"questionId", "question", "docId", "image", "answers", "evidence_bbox"} <= rec.keys()
    ocr = json.loads((root / "ocr" / f"{rec['docId']}.json").read_text())
    assert len(ocr["recognitionResults"][0]["lines"][0]["words"][0]["boundingBox"]) == 8
    qas = load_split(root / "test_id.json", root / "ocr")
    assert [q.qid for q in qas] == [r["questionId"] for r in ann["data"]]


def test_question_names_evidence_keys_and_distractors_share_them(synth):
    root, _ = synth
    for split, ood in (("test_id", False), ("test_ood", True)):
        for qa in load_split(root / f"{split}.json", root / "ocr"):
            words = qa.question.rstrip("?").split()
            k1, k2 = words[3], words[4]
            gold = [ln for ln in qa.lines if ln.words and ln.words[-1].text == qa.answers[0]]
            assert gold and {k1, k2} <= {w.text for w in gold[0].words[:3]}
            sharing = [ln for ln in qa.lines if ln is not gold[0] and {k1, k2} <= {w.text for w in ln.words[:3]}]
            lo, hi = CFG["distractors_ood"] if ood else CFG["distractors"]
            assert len(sharing) <= hi
            x0, y0, x1, y1 = qa.bbox
            if ood:  # out of distribution the evidence is a 1 × 2-cell block
                assert round((x1 - x0) * 32) == 2 and round((y1 - y0) * 32) == 1


def test_features_mark_the_evidence_box(synth):
    root, _ = synth
    qas = load_split(root / "test_id.json", root / "ocr", root / "documents")
    f = featurise(qas, 32, 16, 4)
    L = max(len(qa.lines) for qa in qas)
    assert f["tokens"].shape == (4, L, 16 + 4 + 4 + 1) and f["line_id"].shape == (4, 32, 32)
    vals = line_values(qas)
    for i, qa in enumerate(qas):
        x0, y0, x1, y1 = qa.bbox
        assert f["evidence"][i].sum() == round((x1 - x0) * 32) * round((y1 - y0) * 32)
        n = len(qa.lines)
        assert (f["tokens"][i, :n, -1] == 1).all() and not f["tokens"][i, n:].any()
        # lines are in reading order, and the gold line matches both key words of the question exactly
        ys = [ln.box[1] for ln in qa.lines]
        assert ys == sorted(ys)
        gold = vals[i]["values"].index(qa.answers[0])
        assert np.allclose(f["tokens"][i, gold, 20:22], 1.0, atol=1e-5)
        assert (f["line_id"][i][f["evidence"][i].astype(bool)] == gold).all()
    assert all(qa.answers[0] in v["values"] for qa, v in zip(qas, vals))


def _write(tmp_path, records, ocr=True):
    (tmp_path / "ocr").mkdir(exist_ok=True)
    (tmp_path / "documents").mkdir(exist_ok=True)
    (tmp_path / "documents" / "p.png").write_bytes(b"\x89PNG")
    if ocr:
        (tmp_path / "ocr" / "p.json").write_text(json.dumps({"recognitionResults": [
            {"page": 1, "width": 100, "height": 100, "unit": "pixel", "lines": []}]}))
    (tmp_path / "a.json").write_text(json.dumps({"data": records}))
    return tmp_path / "a.json"


GOOD = {"questionId": 7, "question": "what?", "docId": "p", "image": "documents/p.png", "answers": ["x"],
        "evidence_bbox": [0.1, 0.1, 0.2, 0.2]}


@pytest.mark.parametrize("bad,msg", [
    ({"evidence_bbox": [0.5, 0.1, 0.2, 0.2]}, "x0 < x1"),
    ({"evidence_bbox": [0.1, 0.1, 1.2, 0.2]}, "in [0, 1]"),
    ({"answers": []}, "answers must be"),
    ({"question": " "}, "question must be"),
    ({"evidence_bbox": [0.1, 0.1, 0.2]}, "must be 4 numbers"),
    ({"colour": "red"}, "unknown field(s) ['colour']"),
    ({"image": "documents/missing.png"}, "image 'documents/missing.png' not found"),
])
def test_malformed_records_name_file_and_record(tmp_path, bad, msg):
    ann = _write(tmp_path, [GOOD, {**GOOD, "questionId": 8, **bad}])
    with pytest.raises(DataError) as e:
        load_split(ann, tmp_path / "ocr", tmp_path / "documents")
    assert str(ann) in str(e.value) and "record 1 (questionId 8)" in str(e.value) and msg in str(e.value)


def test_missing_field_missing_ocr_and_broken_json(tmp_path):
    rec = {k: v for k, v in GOOD.items() if k != "evidence_bbox"}
    with pytest.raises(DataError, match="missing field 'evidence_bbox'"):
        load_split(_write(tmp_path, [rec]), tmp_path / "ocr")
    with pytest.raises(DataError, match="p.json: file not found"):
        load_split(_write(tmp_path, [GOOD]), tmp_path / "elsewhere")
    (tmp_path / "b.json").write_text('{"data": [1, 2')
    with pytest.raises(DataError, match="b.json: not valid JSON"):
        load_split(tmp_path / "b.json", tmp_path / "ocr")
    (tmp_path / "c.json").write_text('{"data": []}')
    with pytest.raises(DataError, match="empty"):
        load_split(tmp_path / "c.json", tmp_path / "ocr")


def test_docvqa_fields_are_accepted(tmp_path):
    rec = {**GOOD, "question_types": ["form"], "ucsf_document_id": "p", "ucsf_document_page_no": "1",
           "data_split": "val"}
    assert load_split(_write(tmp_path, [rec]), tmp_path / "ocr", tmp_path / "documents")[0].qid == 7


def test_prep_refuses_bad_input_and_writes_nothing(synth, tmp_path):
    """A bad record in any split stops prep before it writes: no half-written features directory."""
    import shutil

    from paperflow.docloc import stages

    root, _ = synth
    bad = tmp_path / "synth"
    shutil.copytree(root, bad)
    ann = json.loads((bad / "test_ood.json").read_text())
    ann["data"][2]["evidence_bbox"] = [0.5, 0.5, 1.5, 0.6]
    (bad / "test_ood.json").write_text(json.dumps(ann))
    params = {"source": "synthetic", "splits": None, "features": {"grid": 32, "dim": 16, "max_q": 4, "hash_seed": 0}}
    out = tmp_path / "features"
    with pytest.raises(DataError, match=r"test_ood.json: record 2 \(questionId \d+\): evidence_bbox"):
        stages.prep(params, out=out, synthetic=bad)
    assert not out.exists() and not list(tmp_path.glob(".features*"))
