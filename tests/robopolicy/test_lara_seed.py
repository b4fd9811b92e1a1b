"""`lara.jobs: seed`: one `lara-seed` job trains and evaluates every variant of a seed, and writes exactly
what the per-variant `train` and `evaluate` jobs write (CPU, the config/test.yaml sizes)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from paperflow.core.checkpoint import load_weights
from paperflow.core.config import load_config
from paperflow.robopolicy import plan, stages

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    cfg = load_config(REPO / "config" / "test.yaml")["robopolicy"]
    root = tmp_path_factory.mktemp("rp_seed")
    stages.data(plan.data_params(cfg), out=root / "mv")
    stages.lam_pretrain(plan.lam_params(cfg), data=root / "mv", seed=0, out=root / "lam")
    return cfg, root


def _paths(root: Path, variants: list[str]) -> tuple[list[Path], list[Path]]:
    return ([root / "models" / v / "seed0" for v in variants],
            [root / "results" / "lara" / v / "seed0" / "metrics.json" for v in variants])


def _strip(p: Path) -> dict:
    d = json.loads(p.read_text())
    d.pop("manifest", None)
    return d


def test_lara_seed_writes_what_the_per_variant_jobs_write(setup):
    cfg, root = setup
    group = plan.seed_group(cfg)
    names = plan.variants(cfg)
    assert list(group["variants"]) == names and len(names) >= 2
    models, metrics = _paths(root / "fused", names)
    shuffled = list(zip(models, metrics))
    random.Random(3).shuffle(shuffled)  # Snakemake may pass the outputs in any order
    stages.lara_seed(group, data=root / "mv", lam=root / "lam", seed=0, models=[m for m, _ in shuffled][::-1],
                     metrics=[f for _, f in shuffled])
    for v, m_dir, m_file in zip(names, *_paths(root / "sep", names)):
        stages.train(plan.train_params(cfg, v), data=root / "mv", lam=root / "lam", seed=0, out=m_dir)
        stages.evaluate(plan.eval_params(cfg, v), data=root / "mv", lam=root / "lam", model=m_dir, seed=0, out=m_file)
    fused_m, fused_f = _paths(root / "fused", names)
    sep_m, sep_f = _paths(root / "sep", names)
    for v, fm, sm, ff, sf in zip(names, fused_m, sep_m, fused_f, sep_f):
        for w in sorted(p.name for p in sm.glob("*.safetensors")):
            a, b = load_weights(fm / w), load_weights(sm / w)
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), (v, w)
        assert (fm / "log.json").read_text() == (sm / "log.json").read_text(), v
        assert _strip(ff) == _strip(sf), v
        with np.load(ff.with_name("frames.npz")) as x, np.load(sf.with_name("frames.npz")) as y:
            assert np.array_equal(x["frames"], y["frames"]), v
        assert json.loads(Path(str(ff) + ".manifest.json").read_text())["config"] == \
            json.loads(Path(str(sf) + ".manifest.json").read_text())["config"]


def test_lara_seed_matches_outputs_by_name_never_by_position(setup):
    cfg, root = setup
    group = plan.seed_group(cfg)
    names = plan.variants(cfg)
    models, metrics = _paths(root / "bad", names)
    with pytest.raises(SystemExit, match="--models"):
        stages.lara_seed(group, data=root / "mv", lam=root / "lam", seed=0, models=models[:-1], metrics=metrics)
    with pytest.raises(SystemExit, match="--metrics"):
        stages.lara_seed(group, data=root / "mv", lam=root / "lam", seed=0, models=models,
                         metrics=[metrics[0]] * len(metrics))
    assert not (root / "bad").exists()  # nothing trained before the outputs were checked


def test_jobs_switch_picks_the_rule_layout():
    cfg = load_config(REPO / "config" / "config.yaml")["robopolicy"]
    assert plan.jobs_per_seed(cfg)  # the tiny default: one job per seed
    paper = load_config(REPO / "config" / "paper.yaml", {"robopolicy.enabled": True})["robopolicy"]
    assert not plan.jobs_per_seed(paper)  # paper scale: GPU training and CPU evaluation jobs per variant
