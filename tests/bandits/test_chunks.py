"""Chunked simulation jobs (`plan.chunks`, stage `simulate-chunk`): the packing rule, and a chunk job
gives exactly the cells that per-cell `simulate` jobs give (the tiny default runs chunks; config/test.yaml
runs one job per cell)."""

from __future__ import annotations

import copy
import functools

import pytest

from paperflow.bandits import plan, stages
from paperflow.core.config import validate_config
from paperflow.core.io import read_json


@functools.cache
def _base():
    return validate_config({"bandits": {
        "enabled": True, "T": [100, 200, 400], "seeds": 2, "betas": [1.0], "regimes": {"r": {"K": 5, "d": 2}},
        "algorithms": {"blce": {}, "linucb": {"T_max": 200}}, "glm": {"enabled": False},
        "budget": {"enabled": False}}})["bandits"]


def _cfg(**over):
    """The validated base config with top-level keys replaced (validation is slow; the keys are schema-valid)."""
    return {**copy.deepcopy(_base()), **over}


def test_chunks_cover_every_cell_once_and_respect_the_round_bound():
    for limit in (None, 1, 250, 400, 10**6):
        cfg = _cfg(rounds_per_job=limit)
        chunks = plan.chunks(cfg)
        got = sorted((c.exp, c.regime, c.variant, c.T, c.seed) for ch in chunks for c in ch.cells)
        assert got == sorted((c.exp, c.regime, c.variant, c.T, c.seed) for c in plan.cells(cfg))
        for ch in chunks:
            assert {(c.exp, c.regime, c.variant) for c in ch.cells} == {(ch.exp, ch.regime, ch.variant)}
            assert len(ch.cells) == 1 or limit is None or sum(c.T for c in ch.cells) <= limit
    assert len(plan.chunks(_cfg())) == 2  # null: one job per (experiment, regime, algorithm)
    assert len(plan.chunks(_cfg(rounds_per_job=1))) == len(plan.cells(_cfg()))
    # 250 rounds: blce -> [100,100] [200] [200] [400] [400]; linucb -> [100,100] [200] [200]
    assert [len(ch.cells) for ch in plan.chunks(_cfg(rounds_per_job=250))] == [2, 1, 1, 1, 1, 2, 1, 1]
    assert plan.per_cell(_cfg(rounds_per_job=1)) and not plan.per_cell(_cfg(rounds_per_job=2))


def test_changing_one_algorithm_changes_only_its_chunks():
    a, b = _cfg(), _cfg(algorithms={"blce": {"elimination": "latest"}, "linucb": {"T_max": 200}})
    pa = {(c.variant, c.index): plan.chunk_params(a, c.exp, c.regime, c.variant, c.index) for c in plan.chunks(a)}
    pb = {(c.variant, c.index): plan.chunk_params(b, c.exp, c.regime, c.variant, c.index) for c in plan.chunks(b)}
    assert pa.keys() == pb.keys()
    assert [k for k in pa if pa[k] != pb[k]] == [("blce", 0)]
    with pytest.raises(ValueError):
        plan.chunk_params(a, "main", "r", "blce", 7)


def _strip_times(cell):
    return {**cell, "runs": [{k: v for k, v in r.items() if k not in ("runtime_s", "ctx_time_s")} for r in cell["runs"]]}


def test_chunk_job_equals_per_cell_jobs(tmp_path):
    cfg = _cfg(T=[100, 200], algorithms={"blce": {}})
    (ch,) = plan.chunks(cfg)
    out = tmp_path / "chunk0.json"
    stages.simulate_chunk(plan.chunk_params(cfg, ch.exp, ch.regime, ch.variant, ch.index), out=out)
    chunk_cells = read_json(out)["cells"]
    singles = []
    for c in ch.cells:
        f = tmp_path / f"T{c.T}_s{c.seed}.json"
        stages.simulate(plan.job_params(cfg, c.exp, c.regime, c.variant, c.T, c.seed), out=f)
        singles.append(f)
    assert [_strip_times(c) for c in chunk_cells] == [_strip_times(read_json(f)) for f in singles]
    m_chunk = stages.aggregate([out], out=tmp_path / "m1.json")
    m_cells = stages.aggregate(singles, out=tmp_path / "m2.json")
    assert m_chunk["n_cells"] == m_cells["n_cells"] == 4 and m_chunk["n_files"] == 1
    keep = ("final_regret", "n_updates", "regret_curves", "seeds", "stats_per_seed")
    assert [{k: r[k] for k in keep} for r in m_chunk["rows"]] == [{k: r[k] for k in keep} for r in m_cells["rows"]]
