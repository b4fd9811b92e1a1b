"""TOFU-schema generator and the loader on a fixture in real TOFU's on-disk format."""
import json

import pytest

from paperflow.unlearning.data import (TofuFormatError, check_disjoint, generate_tofu, load_tofu, prepare)

TOFU_SPLITS = ["full", "forget01", "forget05", "forget10", "retain99", "retain95", "retain90",
               "forget01_perturbed", "forget05_perturbed", "forget10_perturbed", "retain_perturbed",
               "real_authors", "real_authors_perturbed", "world_facts", "world_facts_perturbed",
               "holdout01", "holdout05", "holdout10"]


def test_generator_writes_tofu_splits_and_fields(tmp_path):
    rows = generate_tofu(tmp_path, n_authors=20, qa_per_author=5, n_holdout_authors=2, seed=3, n_utility=6)
    assert set(TOFU_SPLITS) <= set(rows)
    assert rows["full"] == 100 and rows["forget10"] == 10 and rows["retain90"] == 90 and rows["forget05"] == 5
    # JSON-lines even though named .json (as real TOFU)
    first = (tmp_path / "forget10_perturbed.json").read_text().splitlines()[0]
    r = json.loads(first)
    assert {"question", "answer", "paraphrased_question", "paraphrased_answer", "perturbed_answer"} <= set(r)
    assert len(r["perturbed_answer"]) == 5 and r["answer"] not in r["perturbed_answer"]
    assert len(json.loads((tmp_path / "world_facts_perturbed.json").read_text().splitlines()[0])["perturbed_answer"]) == 3
    full, _ = load_tofu(tmp_path, "full", qa_per_author=5)
    # unique facts per author: the unguessable facts of one author appear in no other author's answers
    by_author = {}
    for x in full:
        by_author.setdefault(x["author_id"], set()).update(x["key_facts"])
    from paperflow.unlearning.data import GENRES, PROFESSIONS, YEARS
    pools = set(GENRES) | set(PROFESSIONS) | set(YEARS)
    for a, facts in by_author.items():
        uniq = facts - pools
        for b, other in by_author.items():
            if a != b:
                assert not (uniq & other)
    # answers reveal their key facts and do not start with the author's name
    for x in full:
        assert all(f in x["answer"] for f in x["key_facts"])
        assert x["answer"].split()[0] in {"The", "A"}
    # forget = last authors, nested; disjoint from retain
    f01, _ = load_tofu(tmp_path, "forget01", qa_per_author=5)
    f10, _ = load_tofu(tmp_path, "forget10", qa_per_author=5)
    r90, _ = load_tofu(tmp_path, "retain90", qa_per_author=5)
    assert {x["question"] for x in f01} <= {x["question"] for x in f10}
    assert min(x["author_id"] for x in f10) == 18
    check_disjoint(f10, r90)


def test_generator_is_deterministic(tmp_path):
    generate_tofu(tmp_path / "a", 12, 4, 1, seed=5)
    generate_tofu(tmp_path / "b", 12, 4, 1, seed=5)
    generate_tofu(tmp_path / "c", 12, 4, 1, seed=6)
    a = (tmp_path / "a" / "full.json").read_text()
    assert a == (tmp_path / "b" / "full.json").read_text()
    assert a != (tmp_path / "c" / "full.json").read_text()


def _real_tofu_fixture(d, n_authors=10):
    """A directory in real TOFU's format: 20 QA per author, no author_id / key_facts, forget01 =
    the last author in `full`, JSON-lines in .json files; forget10_perturbed with the extra fields."""
    d.mkdir()
    full = [{"question": f"What is fact {j} of author {a}?", "answer": f"Fact {j} of author {a} is v{a}_{j}."}
            for a in range(n_authors) for j in range(20)]
    (d / "full.json").write_text("".join(json.dumps(r) + "\n" for r in full))
    forget = full[-20:]
    (d / "forget01.json").write_text("".join(json.dumps(r) + "\n" for r in forget))
    (d / "retain99.json").write_text("".join(json.dumps(r) + "\n" for r in full[:-20]))
    pert = [{**r, "paraphrased_question": "Tell me: " + r["question"], "paraphrased_answer": r["answer"],
             "perturbed_answer": ["wrong"] * 5} for r in forget]
    (d / "forget01_perturbed.json").write_text("".join(json.dumps(r) + "\n" for r in pert))
    return full


def test_loader_reads_real_tofu_format(tmp_path):
    d = tmp_path / "TOFU"
    _real_tofu_fixture(d)
    forget, info = load_tofu(d, "forget01")
    retain, _ = load_tofu(d, "retain99")
    assert len(forget) == 20 and info["author_id_from"] == "full.json position"
    assert {r["author_id"] for r in forget} == {9}  # position in full, not in the split file
    assert not info["has_key_facts"] and not info["has_paraphrased_question"]
    assert forget[0]["paraphrased_question"] == forget[0]["question"]  # graceful fallback
    check_disjoint(forget, retain)
    pert, pinfo = load_tofu(d, "forget01_perturbed")
    assert pinfo["has_paraphrased_question"] and pinfo["has_perturbed_answer"]
    assert pert[0]["paraphrased_question"].startswith("Tell me")
    with pytest.raises(TofuFormatError):
        load_tofu(d, "forget01", expected_rows=40)


def test_loader_accepts_vendored_json_array_and_rejects_bad_rows(tmp_path):
    (tmp_path / "forget.json").write_text(json.dumps([{"question": "q1", "answer": "a1"}, {"question": "q2", "answer": "a2"}]))
    rows, info = load_tofu(tmp_path, "forget")
    assert len(rows) == 2 and info["author_id_from"] == "row index" and rows[1]["author_id"] == 0
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(TofuFormatError, match="answer"):
        load_tofu(tmp_path, "bad")
    with pytest.raises(FileNotFoundError):
        load_tofu(tmp_path, "nope")


def test_prepare_copies_real_tofu_through_the_loader(tmp_path):
    src = tmp_path / "TOFU"
    _real_tofu_fixture(src)
    params = {"data": {"source": "tofu_dir", "tofu_dir": str(src), "qa_per_author": 20,
                       "forget_split": "forget01", "retain_split": "retain99"}}
    man = prepare(params, tmp_path / "out")
    assert man["splits"]["full"]["rows"] == 200 and man["forget_authors"] == [9]
    assert man["flags"]["keyfact_judge_available"] is False
    # overlap between forget and retain is caught
    (src / "retain99.json").write_text((src / "full.json").read_text())
    with pytest.raises(TofuFormatError, match="share"):
        prepare(params, tmp_path / "out2")


@pytest.mark.parametrize("text", ["", "  \n\t\n", "[]"])
def test_empty_split_is_refused_naming_the_file(tmp_path, text):
    (tmp_path / "forget10.json").write_text(text)
    with pytest.raises(TofuFormatError, match=r"forget10\.json.*0 rows|forget10\.json: empty"):
        load_tofu(tmp_path, "forget10")


def test_prepare_refuses_an_empty_split(tmp_path):
    src = tmp_path / "TOFU"
    _real_tofu_fixture(src)
    (src / "forget01.json").write_text("\n  \n")
    params = {"data": {"source": "tofu_dir", "tofu_dir": str(src), "qa_per_author": 20,
                       "forget_split": "forget01", "retain_split": "retain99"}}
    with pytest.raises(TofuFormatError, match="forget01.json"):
        prepare(params, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing that looks like a valid dataset


def test_prepare_without_full_json_says_it_is_needed(tmp_path):
    src = tmp_path / "TOFU"
    _real_tofu_fixture(src)
    (src / "full.json").unlink()
    params = {"data": {"source": "tofu_dir", "tofu_dir": str(src), "qa_per_author": 20,
                       "forget_split": "forget01", "retain_split": "retain99"}}
    with pytest.raises(TofuFormatError, match="full.json is missing") as e:
        prepare(params, tmp_path / "out")
    assert "share authors" not in str(e.value)


def test_broken_json_array_names_the_file(tmp_path):
    (tmp_path / "forget.json").write_text('[{"question": "q1", "answer": "a1"}, {"question": ')
    with pytest.raises(TofuFormatError, match=r"forget\.json: not a valid JSON array"):
        load_tofu(tmp_path, "forget")
