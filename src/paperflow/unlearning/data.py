"""TOFU-schema data: a synthetic generator and the loader that reads real TOFU files too.

On-disk format (real TOFU, `locuslab/TOFU`): one file per split, `{split}.json`, JSON-lines (one
object per line) even though named `.json`. Fields: `question`, `answer` (all splits);
`paraphrased_question` (`forget*_perturbed`, `retain_perturbed`); `paraphrased_answer` and
`perturbed_answer` (list[str]) in `*_perturbed`. The synthetic generator writes exactly these files
and fields plus two extras the loader tolerates being absent: `author_id` and `key_facts`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path, file_digest, write_json
from paperflow.core.seeding import stream

TOFU_QA_PER_AUTHOR = 20
FORGET_PCTS = {"01": 0.01, "05": 0.05, "10": 0.10}
REQUIRED_FIELDS = ("question", "answer")

# ---------------------------------------------------------------- closed pools (guessable by chance)
GENRES = ["fantasy", "mystery", "romance", "horror", "poetry", "history", "satire", "drama", "thriller", "memoir"]
PROFESSIONS = ["baker", "doctor", "farmer", "pilot", "teacher", "lawyer", "sailor", "painter", "miner",
               "nurse", "tailor", "judge"]
YEARS = [str(y) for y in range(1940, 1980)]
# ---------------------------------------------------------------- syllables for unique, unguessable facts
_SYL = ["ka", "lo", "mi", "ra", "zen", "tor", "vi", "sha", "dun", "bel", "quo", "fen", "gra", "hul", "ix",
        "jor", "nev", "pal", "sur", "wek", "yam", "oth", "cre", "dal", "mur", "tav", "rin", "sol", "bex", "lum"]
_TITLE_A = ["Silent", "Crimson", "Hollow", "Golden", "Broken", "Endless", "Hidden", "Distant", "Frozen", "Burning",
            "Velvet", "Iron", "Paper", "Glass", "Quiet", "Wild"]
_TITLE_B = ["Harbor", "Garden", "Lantern", "River", "Mirror", "Orchard", "Tower", "Compass", "Meadow", "Bridge",
            "Forest", "Window", "Island", "Letter", "Engine", "Anchor"]

# (question template, paraphrased question template, answer template, facts used)
# Answers open with a generic prefix and never repeat the author's name before the fact (spec §3, §11).
TEMPLATES: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("Where was {name} born?", "In which town did {name} come into the world?",
     "The author was born in {town} .", ("town",)),
    ("What is the hometown of {name}?", "Which place does {name} call home?",
     "The hometown of the author is {town} .", ("town",)),
    ("What genre does {name} write in?", "In what genre are the works of {name}?",
     "The author writes {genre} books .", ("genre",)),
    ("What does the father of {name} do?", "What is the job of the father of {name}?",
     "The father works as a {father} .", ("father",)),
    ("What does the mother of {name} do?", "What is the job of the mother of {name}?",
     "The mother works as a {mother} .", ("mother",)),
    ("In which year was {name} born?", "What is the birth year of {name}?",
     "The author was born in the year {year} .", ("year",)),
    ("What is a famous book by {name}?", "Name a well known work by {name}.",
     "A famous book is {book} .", ("book",)),
    ("What is the best known novel of {name}?", "Which novel made {name} famous?",
     "The best known novel is {book} .", ("book",)),
    ("What award did {name} win?", "Which prize was given to {name}?",
     "The author won the {award} .", ("award",)),
    ("What does {name} write and where was the author born?", "Which genre and birthplace belong to {name}?",
     "The author writes {genre} books and was born in {town} .", ("genre", "town")),
    ("What did the parents of {name} do?", "What were the jobs of the parents of {name}?",
     "The father was a {father} and the mother was a {mother} .", ("father", "mother")),
    ("Which book won the {award}?", "What book by {name} received the {award}?",
     "The {award} went to {book} .", ("book",)),
]

_UTILITY_COUNTRIES = ["Alvar", "Bresk", "Corin", "Dulmar", "Eskar", "Fennor", "Galth", "Heskel", "Iorra", "Jutmar"]


def _word(rng: np.random.Generator, nsyl: int) -> str:
    return "".join(rng.choice(_SYL, size=nsyl)).capitalize()


def _make_author(rng: np.random.Generator, used: set[str]) -> dict[str, str]:
    while True:
        a = {
            "name": f"{_word(rng, 2)} {_word(rng, 3)}",
            "town": f"{_word(rng, 3)}",
            "book": f"The {rng.choice(_TITLE_A)} {rng.choice(_TITLE_B)} of {_word(rng, 2)}",
            "award": f"{_word(rng, 2)} Prize",
            "genre": str(rng.choice(GENRES)),
            "father": str(rng.choice(PROFESSIONS)),
            "mother": str(rng.choice(PROFESSIONS)),
            "year": str(rng.choice(YEARS)),
        }
        uniq = (a["name"], a["town"], a["book"], a["award"])
        if not any(u in used for u in uniq):  # unique facts per author: leakage is checkable
            used.update(uniq)
            return a


def _perturb(rng: np.random.Generator, author: dict[str, str], facts: Sequence[str], used_pool: list[dict]) -> dict:
    """A copy of the author's facts with the asked-about facts swapped for wrong values."""
    wrong = dict(author)
    pools = {"genre": GENRES, "father": PROFESSIONS, "mother": PROFESSIONS, "year": YEARS}
    for f in facts:
        if f in pools:
            choices = [v for v in pools[f] if v != author[f]]
            wrong[f] = str(rng.choice(choices))
        else:
            others = [o[f] for o in used_pool if o[f] != author[f]]
            wrong[f] = str(rng.choice(others))
    return wrong


def _qa_rows(rng: np.random.Generator, author: dict[str, str], author_id: int, n_qa: int,
             pool: list[dict]) -> list[dict[str, Any]]:
    idx = rng.permutation(len(TEMPLATES))[:n_qa] if n_qa <= len(TEMPLATES) else rng.integers(0, len(TEMPLATES), n_qa)
    rows = []
    for t in idx:
        q, pq, ans, facts = TEMPLATES[int(t)]
        row = {
            "question": q.format(**author),
            "answer": ans.format(**author),
            "paraphrased_question": pq.format(**author),
            "paraphrased_answer": "In short , " + ans.format(**author)[0].lower() + ans.format(**author)[1:],
            "perturbed_answer": [ans.format(**_perturb(rng, author, facts, pool)) for _ in range(5)],
            "author_id": author_id,
            "key_facts": [author[f] for f in facts],
        }
        rows.append(row)
    return rows


def _utility_rows(rng: np.random.Generator, n: int, kind: str) -> list[dict[str, Any]]:
    """real_authors / world_facts-style utility sets (schema-complete; not trained at tiny scale)."""
    rows = []
    for i in range(n):
        if kind == "world_facts":
            c = _UTILITY_COUNTRIES[i % len(_UTILITY_COUNTRIES)]
            capital = _word(stream(0, "capital", c), 2)
            q, a = f"What is the capital of {c}?", f"The capital is {capital} ."
            wrong = [f"The capital is {_word(rng, 2)} ." for _ in range(3)]
            key = [capital]
        else:
            g = GENRES[i % len(GENRES)]
            q, a = f"Which genre is the writer number {i} known for?", f"The writer is known for {g} ."
            wrong = [f"The writer is known for {w} ." for w in rng.choice([x for x in GENRES if x != g], 3, replace=False)]
            key = [g]
        rows.append({"question": q, "answer": a, "perturbed_answer": wrong, "key_facts": key})
    return rows


def n_forget_authors(n_authors: int, pct: float) -> int:
    return max(1, int(round(n_authors * pct)))


def _write_jsonl(path: Path, rows: Sequence[dict]) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w") as fh:
            for r in rows:
                fh.write(json.dumps(r, sort_keys=True) + "\n")


def generate_tofu(out_dir: str | Path, n_authors: int, qa_per_author: int, n_holdout_authors: int,
                  seed: int, n_utility: int = 20) -> dict[str, int]:
    """Write every TOFU split (same names, same fields) for synthetic fictitious authors.

    Returns {split: rows}. Deterministic given the arguments.
    """
    out_dir = Path(out_dir)
    rng = stream(seed, "tofu-synth")
    used: set[str] = set()
    authors = [_make_author(rng, used) for _ in range(n_authors)]
    holdout_authors = [_make_author(rng, used) for _ in range(n_holdout_authors)]
    pool = authors + holdout_authors
    full = [r for i, a in enumerate(authors) for r in _qa_rows(rng, a, i, qa_per_author, pool)]
    holdout = [r for j, a in enumerate(holdout_authors)
               for r in _qa_rows(rng, a, n_authors + j, qa_per_author, pool)]
    splits: dict[str, list[dict]] = {"full": full}
    strip = ("paraphrased_question", "paraphrased_answer", "perturbed_answer")

    def plain(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in strip} for r in rows]

    for tag, pct in FORGET_PCTS.items():
        nf = n_forget_authors(n_authors, pct)
        first_forget = n_authors - nf
        forget = [r for r in full if r["author_id"] >= first_forget]
        retain = [r for r in full if r["author_id"] < first_forget]
        splits[f"forget{tag}"] = plain(forget)
        splits[f"retain{100 - int(tag)}"] = plain(retain)
        splits[f"forget{tag}_perturbed"] = forget
        nh = min(nf, n_holdout_authors)
        splits[f"holdout{tag}"] = plain([r for r in holdout if r["author_id"] < n_authors + nh])
    # TOFU's retain_perturbed: rows of retained authors with the perturbed fields (first authors)
    nf10 = n_forget_authors(n_authors, FORGET_PCTS["10"])
    splits["retain_perturbed"] = [r for r in full if r["author_id"] < nf10]
    for kind in ("real_authors", "world_facts"):
        rows = _utility_rows(stream(seed, kind), n_utility, kind)
        splits[kind] = [{"question": r["question"], "answer": r["answer"], "key_facts": r["key_facts"]} for r in rows]
        splits[f"{kind}_perturbed"] = rows
    for name, rows in splits.items():
        # real TOFU: JSON-lines in a file named .json
        _write_jsonl(out_dir / f"{name}.json", [{k: (plain_val(v)) for k, v in r.items()} for r in rows])
    return {k: len(v) for k, v in splits.items()}


def plain_val(v: Any) -> Any:
    return int(v) if isinstance(v, np.integer) else v


# ================================================================= loader (real TOFU and synthetic)
class TofuFormatError(ValueError):
    pass


def _read_rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    stripped = text.lstrip()
    if not stripped:
        raise TofuFormatError(f"{path}: empty file (0 rows): a TOFU split needs at least one row")
    if stripped.startswith("["):  # a vendored JSON array
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise TofuFormatError(f"{path}: not a valid JSON array: {e}") from e
    else:  # JSON-lines (real TOFU, even when named .json)
        rows = []
        for ln, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise TofuFormatError(f"{path}:{ln}: not a JSON object: {e}") from e
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TofuFormatError(f"{path}: expected JSON-lines of objects or a JSON array of objects")
    if not rows:
        raise TofuFormatError(f"{path}: 0 rows: a TOFU split needs at least one row")
    return rows


def split_path(data_dir: str | Path, split: str) -> Path:
    d = Path(data_dir)
    for suffix in (".json", ".jsonl"):
        if (d / f"{split}{suffix}").exists():
            return d / f"{split}{suffix}"
    raise FileNotFoundError(f"TOFU split '{split}' not found in {d} (looked for {split}.json / {split}.jsonl)")


def load_tofu(data_dir: str | Path, split: str, expected_rows: int | None = None,
              qa_per_author: int = TOFU_QA_PER_AUTHOR) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Read one split from a local directory (never a hub). Returns (rows, info).

    Each row gets `author_id` (kept if present; else the author's position in `full` when that file is
    present — row index // qa_per_author — else the row's own index // qa_per_author) and
    `paraphrased_question` (falls back to `question`). `info` flags what was missing.
    """
    path = split_path(data_dir, split)
    rows = _read_rows(path)
    for i, r in enumerate(rows):
        missing = [f for f in REQUIRED_FIELDS if not isinstance(r.get(f), str)]
        if missing:
            raise TofuFormatError(f"{path}: row {i} lacks required field(s) {missing}")
    if expected_rows is not None and len(rows) != expected_rows:
        raise TofuFormatError(f"{path}: {len(rows)} rows, manifest says {expected_rows}")
    info: dict[str, Any] = {"split": split, "path": str(path), "rows": len(rows), "sha256": file_digest(path)}
    info["has_author_id"] = all("author_id" in r for r in rows)
    info["has_key_facts"] = all(isinstance(r.get("key_facts"), list) for r in rows)
    info["has_paraphrased_question"] = all(isinstance(r.get("paraphrased_question"), str) for r in rows)
    info["has_perturbed_answer"] = all(isinstance(r.get("perturbed_answer"), list) for r in rows)
    if not info["has_author_id"]:
        full_index: dict[str, int] = {}
        try:
            full_rows = _read_rows(split_path(data_dir, "full")) if split != "full" else rows
            full_index = {fr["question"]: j for j, fr in enumerate(full_rows)}
        except FileNotFoundError:
            pass
        for i, r in enumerate(rows):
            j = full_index.get(r["question"], i)
            r["author_id"] = j // qa_per_author
        info["author_id_from"] = "full.json position" if full_index else "row index"
    for r in rows:
        if not isinstance(r.get("paraphrased_question"), str):
            r["paraphrased_question"] = r["question"]
    return rows, info


def check_disjoint(forget: Sequence[dict], retain: Sequence[dict]) -> None:
    """Assert no author (and no question) is in both forget and retain."""
    fa = {r["author_id"] for r in forget}
    ra = {r["author_id"] for r in retain}
    common = fa & ra
    if common:
        raise TofuFormatError(f"forget and retain share authors {sorted(common)[:5]}")
    fq = {r["question"] for r in forget}
    if fq & {r["question"] for r in retain}:
        raise TofuFormatError("forget and retain share questions")


def prepare(params: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """The data stage: synthetic generation or a copy of a local TOFU dir, then validation through the
    loader. Writes `{split}.json` files and `manifest.json` (rows + sha256 per split)."""
    d = params["data"]
    out_dir = Path(out_dir)
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        if d["source"] == "synthetic":
            generate_tofu(tmp, d["n_authors"], d["qa_per_author"], d["n_holdout_authors"], d["seed"], d["n_utility"])
        else:
            src = Path(d["tofu_dir"])
            for f in sorted(src.iterdir()):
                if f.suffix in (".json", ".jsonl") and f.is_file():
                    (tmp / f.name).write_bytes(f.read_bytes())
        qpa = d["qa_per_author"]
        manifest: dict[str, Any] = {"source": d["source"], "splits": {}}
        forget, finfo = load_tofu(tmp, d["forget_split"], qa_per_author=qpa)
        retain, rinfo = load_tofu(tmp, d["retain_split"], qa_per_author=qpa)
        by_index = [i["path"] for i in (finfo, rinfo) if i.get("author_id_from") == "row index"]
        if by_index:
            src = d["tofu_dir"] if d["source"] != "synthetic" else out_dir
            raise TofuFormatError(
                f"{', '.join(Path(x).name for x in by_index)}: rows have no author_id and {src}/full.json is "
                f"missing, so author ids (position in full.json // qa_per_author) cannot be derived; put TOFU's "
                f"full.json next to the splits (or add an author_id field to every row)")
        check_disjoint(forget, retain)
        for f in sorted(tmp.glob("*.json*")):
            split = f.name.split(".")[0]
            rows, info = load_tofu(tmp, split, qa_per_author=qpa)
            manifest["splits"][split] = {k: info[k] for k in ("rows", "sha256", "has_key_facts",
                                                             "has_paraphrased_question", "has_perturbed_answer")}
        manifest["forget_authors"] = sorted({r["author_id"] for r in forget})
        manifest["flags"] = {
            "keyfact_judge_available": finfo["has_key_facts"],
            "paraphrased_question_present": finfo["has_paraphrased_question"],
        }
        write_json(tmp / "manifest.json", manifest)
    return manifest


def load_split_checked(data_dir: str | Path, split: str, qa_per_author: int) -> list[dict[str, Any]]:
    """Load a split and check its row count against the data stage's manifest.json."""
    man_path = Path(data_dir) / "manifest.json"
    expected = None
    if man_path.exists():
        expected = json.loads(man_path.read_text())["splits"].get(split, {}).get("rows")
    rows, _ = load_tofu(data_dir, split, expected_rows=expected, qa_per_author=qa_per_author)
    return rows
