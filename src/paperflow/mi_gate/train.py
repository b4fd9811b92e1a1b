"""The gate stage's work (captioner, cross-fitted scores, selections) and one arm's runs (augmented
training text → re-estimated interactions → late-fusion model → every test condition under T0 and T1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from paperflow.core.seeding import stream
from paperflow.mi_gate import estimator as E
from paperflow.mi_gate.data import (TYPES, Dataset, corrupt_image, drop_words, embed_texts)
from paperflow.mi_gate.evaluate import condition_metrics
from paperflow.mi_gate.model import LateFusion, caption, predict_attributes, random_words, train_captioner

TEXT_VARIANTS = ("T0", "T1")


def append(texts: Sequence[str], extra: Mapping[int, str]) -> list[str]:
    """text_n ← text_n + " " + extra_n for the positions in `extra` (the code's augmentation)."""
    return [f"{t} {extra[k]}" if k in extra else t for k, t in enumerate(texts)]


def run_gate(ds: Mapping[str, Dataset], p: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Train the captioner, caption every train image, score the train set (cross-fitted LSMI), gate at
    every τ. Returns (captioner, gate record)."""
    tr = ds["train"]
    if tr.colour is None or tr.shape is None:
        raise ValueError("the tiny captioner needs latent colour/shape labels (synthetic data); real data "
                         "brings its own captions (paper.yaml: captions)")
    cap = train_captioner(tr.image, tr.colour, tr.shape, p["captioner"])
    cap_acc = {}
    for s, d in ds.items():
        c, sh = predict_attributes(cap, d.image)
        cap_acc[s] = {"colour": float(np.mean(c == d.colour)), "shape": float(np.mean(sh == d.shape))}
    xt = embed_texts(tr.text, int(p["text"]["dim"]), int(p["text"]["hash_seed"]))
    est = E.lsmi_crossfit(tr.image, xt, tr.y, p["estimator"], int(p["estimator"]["seed"]))
    sc = est["scores"]
    dom = E.dominant(sc)
    valid = dom == E.TERMS.index("u_v")
    rec: dict[str, Any] = {
        "ids": tr.ids.tolist(), "captions": caption(cap, tr.image), "captioner_acc": cap_acc,
        "scores": {k: v.tolist() for k, v in sc.items()}, "delta": est["delta"],
        "pieces_mean": {k: float(v.mean()) for k, v in est["pieces"].items()},
        "means": E.means(sc), "raw_means": est["raw_means"], "shares": E.dominance_shares(sc), "n_valid": int(valid.sum()),
        "selected": {f"{t:g}": tr.ids[E.gate_select(sc, float(t))].tolist() for t in p["taus"]},
    }
    if tr.types is not None:
        rec["crosstab"] = E.crosstab(dom, tr.types)
        rec["valid_true_uv"] = int(np.sum(valid & (tr.types == TYPES.index("U_V"))))
        rec["per_type_means"] = {t: {k: float(sc[k][tr.types == i].mean()) for k in E.TERMS}
                                 for i, t in enumerate(TYPES) if (tr.types == i).any()}
    return cap, rec


def training_text(arm: str, tau: float | None, seed: int, tr: Dataset, gate: Mapping[str, Any],
                  vocab: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The arm's training text and which train positions were augmented. (c) and (d) augment the same
    random subset for a seed, of the gate's size at that τ, so they differ only in what is appended."""
    if arm == "original":
        return list(tr.text), np.array([], dtype=np.int64)
    assert tau is not None
    pos = {int(i): k for k, i in enumerate(tr.ids)}
    caps = dict(zip(gate["ids"], gate["captions"]))
    chosen_ids = gate["selected"][f"{tau:g}"]
    if arm == "gated":
        idx = np.array(sorted(pos[int(i)] for i in chosen_ids), dtype=np.int64)
    else:
        rng = stream(seed, "subset", f"{tau:g}")
        idx = np.sort(rng.choice(len(tr), size=len(chosen_ids), replace=False)).astype(np.int64)
    if arm in ("gated", "random"):
        extra = {int(k): caps[int(tr.ids[k])] for k in idx}
    elif arm == "words":
        words = random_words(len(idx), vocab, stream(seed, "words", f"{tau:g}"))
        extra = {int(k): w for k, w in zip(idx, words)}
    else:
        raise ValueError(f"unknown arm {arm!r}")
    return append(tr.text, extra), idx


def test_inputs(te: Dataset, captioner: Any, p: Mapping[str, Any]) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(text variant, condition) → (image features, text features); the same for every arm and seed.
    T1 appends the captioner's caption of the (possibly corrupted) test image."""
    ev, dim, hs = p["eval"], int(p["text"]["dim"]), int(p["text"]["hash_seed"])
    out = {}
    for cond in ev["conditions"]:
        rng = stream(int(ev["seed"]), cond)
        img = corrupt_image(te.image, cond, rng, float(ev["dropout"]))
        text = drop_words(te.text, float(ev["word_drop"]), rng) if cond == "worddrop" else list(te.text)
        caps = caption(captioner, img)
        out[("T0", cond)] = (img, embed_texts(text, dim, hs))
        out[("T1", cond)] = (img, embed_texts([f"{t} {c}".strip() for t, c in zip(text, caps)], dim, hs))
    return out


def run_seed(arm: str, tau: float | None, seed: int, ds: Mapping[str, Dataset], gate: Mapping[str, Any],
             tests: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]], p: Mapping[str, Any]) -> dict[str, Any]:
    tr, va, te = ds["train"], ds["val"], ds["test"]
    dim, hs = int(p["text"]["dim"]), int(p["text"]["hash_seed"])
    texts, idx = training_text(arm, tau, seed, tr, gate, p["random_words"])
    xt = embed_texts(texts, dim, hs)
    res: dict[str, Any] = {"seed": seed, "n_augmented": int(len(idx))}
    if tr.types is not None:
        res["augmented_types"] = {t: int(np.sum(tr.types[idx] == i)) for i, t in enumerate(TYPES)}
    if p["eval"]["reestimate"]:
        est = E.lsmi_crossfit(tr.image, xt, tr.y, p["estimator"], seed)
        res["interactions"] = {"means": E.means(est["scores"]), "shares": E.dominance_shares(est["scores"]),
                               "raw_means": est["raw_means"], "delta": est["delta"]}
    net = LateFusion(tr.image.shape[1], dim, int(p["model"]["hidden"]), seed)
    hist = net.fit(tr.image, xt, tr.y, p["model"], seed)
    res["final_loss"] = hist[-1]
    res["val_acc"] = float(np.mean(net.predict(va.image, embed_texts(va.text, dim, hs)) == va.y))
    res["test"] = {}
    for tv in TEXT_VARIANTS:
        clean = net.predict(*tests[(tv, "clean")])
        res["test"][tv] = {cond: condition_metrics(clean, net.predict(*tests[(tv, cond)]), te.y, te.types)
                           for cond in p["eval"]["conditions"]}
    return res
