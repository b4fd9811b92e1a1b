"""A real English corpus available offline everywhere: the docstrings of the installed Python
standard library, written in the on-disk layout of WikiText-2 raw (`wiki.{train,valid,test}.raw`).

The same reader (`read_split`) reads a staged WikiText-2 raw directory at paper scale, and
`read_split` also reads C4-style JSON lines (`{"text": ...}` per line, optionally .gz).

Documents are stdlib modules (all docstrings of one .py file, module/class/function order), split
90/5/5 by a hash of the module path, so no module contributes to two splits. Docstrings that occur
in more than one module are kept only in the first (sorted path order), so no text is shared
between splits.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import inspect
import json
import sysconfig
from collections.abc import Iterator
from pathlib import Path

SPLIT_FILES = {"train": "wiki.train.raw", "valid": "wiki.valid.raw", "test": "wiki.test.raw"}
_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "lib2to3",
               "turtledemo", "ensurepip", "venv"}


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _docstrings(tree: ast.AST) -> Iterator[str]:
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    for n in nodes:
        d = ast.get_docstring(n, clean=True)
        if d:
            yield d


def _is_prose(doc: str, min_words: int) -> bool:
    words = doc.split()
    if len(words) < min_words:
        return False
    alpha = sum(c.isalpha() or c.isspace() for c in doc)
    return alpha / max(1, len(doc)) > 0.75  # mostly words, not code listings or tables


def stdlib_documents(root: Path | None = None, min_words: int = 12) -> list[tuple[str, str]]:
    """[(module name, text)] for every stdlib module with prose docstrings, sorted by path."""
    root = root or stdlib_root()
    seen: set[str] = set()
    docs = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if _SKIP_PARTS & set(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        paras = []
        for d in _docstrings(tree):
            d = inspect.cleandoc(d).strip()
            key = hashlib.sha1(d.encode()).hexdigest()
            if key in seen or not _is_prose(d, min_words):
                continue
            seen.add(key)
            paras.append(d)
        if paras:
            name = ".".join(rel.with_suffix("").parts)
            docs.append((name, "\n\n".join(paras)))
    return docs


def split_of(name: str, fractions: tuple[float, float, float] = (0.9, 0.05, 0.05)) -> str:
    u = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) / 2**32
    if u < fractions[0]:
        return "train"
    return "valid" if u < fractions[0] + fractions[1] else "test"


def write_stdlib_corpus(out_dir: str | Path, fractions: tuple[float, float, float] = (0.9, 0.05, 0.05),
                        min_words: int = 12) -> dict:
    """Write wiki.{train,valid,test}.raw (WikiText raw layout: ' = title = ' headers, blank-line
    separated paragraphs). Returns per-split document/character counts."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts: dict[str, list[str]] = {s: [] for s in SPLIT_FILES}
    for name, text in stdlib_documents(min_words=min_words):
        parts[split_of(name, fractions)].append(f" = {name} = \n\n{text}\n")
    stats = {}
    for split, fname in SPLIT_FILES.items():
        body = "\n".join(parts[split])
        (out_dir / fname).write_text(body, encoding="utf-8")
        stats[split] = {"documents": len(parts[split]), "chars": len(body)}
    return stats


def read_split(path: str | Path, split: str, fmt: str = "wikitext_raw") -> str:
    """Text of one split. `wikitext_raw`: `path` is a directory with wiki.{train,valid,test}.raw
    (WikiText-2 raw or our stdlib corpus). `jsonl`: `path/{split}.json[l][.gz]` with one
    {"text": ...} object per line (C4 shards renamed or symlinked per split); documents are joined
    with "\n\n"."""
    path = Path(path)
    if fmt == "wikitext_raw":
        f = path / SPLIT_FILES[split]
        if not f.is_file():
            raise FileNotFoundError(f"{f}: expected WikiText raw layout (wiki.train/valid/test.raw)")
        return f.read_text(encoding="utf-8")
    if fmt == "jsonl":
        for cand in (f"{split}.jsonl", f"{split}.json", f"{split}.jsonl.gz", f"{split}.json.gz"):
            f = path / cand
            if f.is_file():
                opener = gzip.open if f.suffix == ".gz" else open
                with opener(f, "rt", encoding="utf-8") as fh:
                    return "\n\n".join(json.loads(line)["text"] for line in fh if line.strip())
        raise FileNotFoundError(f"{path}: no {split}.jsonl[.gz] (C4-style JSON lines)")
    raise ValueError(f"unknown corpus format {fmt!r}")
