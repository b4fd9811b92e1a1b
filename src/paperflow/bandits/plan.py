"""Experiment planning: which simulation cells a config asks for, and exactly which parameters each
cell's job depends on. Rules and the CLI both call these, so they can never disagree."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

EXPERIMENTS = ("main", "glm", "budget")


@dataclass(frozen=True)
class Cell:
    exp: str  # main | glm | budget
    regime: str  # regime name (main, budget) or "glm"
    variant: str  # algorithm name, or "<algo>-M<m>" / "<algo>-C<c>" in the budget sweep
    T: int
    seed: int

    def path(self, results: str) -> str:
        return f"{results}/bandits/runs/{self.exp}/{self.regime}/{self.variant}/T{self.T}_s{self.seed}.json"


def _seeds(cfg: Mapping[str, Any], algo_cfg: Mapping[str, Any]) -> range:
    return range(int(algo_cfg.get("seeds", cfg["seeds"])))


def cells(cfg: Mapping[str, Any]) -> list[Cell]:
    out: list[Cell] = []
    for regime in cfg["regimes"]:
        for algo, acfg in cfg["algorithms"].items():
            for T in cfg["T"]:
                if int(T) > int(acfg.get("T_max") or T) or int(T) < int(acfg.get("T_min") or T):
                    continue  # an algorithm limited to part of the T grid (expensive baselines)
                out += [Cell("main", regime, algo, int(T), s) for s in _seeds(cfg, acfg)]
    g = cfg["glm"]
    if g["enabled"]:
        for algo, acfg in g["algorithms"].items():
            out += [Cell("glm", "glm", algo, int(g["T"]), s) for s in _seeds(cfg, acfg)]
    b = cfg["budget"]
    if b["enabled"]:
        variants = [f"blce-M{m}" for m in b["blce_M"]] + [f"rs_oful-C{c:g}" for c in b["rs_oful_C"]]
        for v in variants:
            out += [Cell("budget", b["regime"], v, int(b["T"]), s) for s in range(int(cfg["seeds"]))]
    return out


@dataclass(frozen=True)
class Chunk:
    """The cells one `bandits_simulate` job runs: part `index` of one (experiment, regime, variant)."""

    exp: str
    regime: str
    variant: str
    index: int
    cells: tuple[Cell, ...]

    def path(self, results: str) -> str:
        return f"{results}/bandits/runs/{self.exp}/{self.regime}/{self.variant}/chunk{self.index}.json"


def per_cell(cfg: Mapping[str, Any]) -> bool:
    """`rounds_per_job: 1`: one job per cell, in the per-cell layout (`T{T}_s{seed}.json`, stage `simulate`)."""
    return cfg.get("rounds_per_job") == 1


def chunks(cfg: Mapping[str, Any]) -> list[Chunk]:
    return list(_chunks(json.dumps(cfg, sort_keys=True, default=str)))


@lru_cache(maxsize=8)
def _chunks(cfg_json: str) -> tuple[Chunk, ...]:
    """Pack the cells of each (experiment, regime, variant), in (T, seed) order, into jobs of at most
    `rounds_per_job` decision rounds (sum of T; a longer cell gets a job of its own; null: one job per
    (experiment, regime, variant)). Changing one algorithm's parameters changes only its chunks."""
    cfg = json.loads(cfg_json)
    limit = cfg.get("rounds_per_job")
    groups: dict[tuple[str, str, str], list[Cell]] = {}
    for c in cells(cfg):
        groups.setdefault((c.exp, c.regime, c.variant), []).append(c)
    out: list[Chunk] = []
    for (exp, regime, variant), group in groups.items():
        parts: list[list[Cell]] = [[]]
        for c in sorted(group, key=lambda c: (c.T, c.seed)):
            if parts[-1] and limit is not None and sum(x.T for x in parts[-1]) + c.T > int(limit):
                parts.append([])
            parts[-1].append(c)
        out += [Chunk(exp, regime, variant, i, tuple(p)) for i, p in enumerate(parts)]
    return tuple(out)


def outputs(cfg: Mapping[str, Any], results: str) -> list[str]:
    """Every simulation file the aggregate stage reads: one per cell (`per_cell`) or one per chunk."""
    if per_cell(cfg):
        return [c.path(results) for c in cells(cfg)]
    return [ch.path(results) for ch in chunks(cfg)]


def chunk_params(cfg: Mapping[str, Any], exp: str, regime: str, variant: str, chunk: int) -> dict[str, Any]:
    """One `bandits_simulate` job: the `job_params` of every cell of chunk `chunk` of (exp, regime, variant)."""
    for ch in chunks(cfg):
        if (ch.exp, ch.regime, ch.variant, ch.index) == (exp, regime, variant, int(chunk)):
            return {"cells": [job_params(cfg, c.exp, c.regime, c.variant, c.T, c.seed) for c in ch.cells]}
    raise ValueError(f"no chunk {chunk} of {exp}/{regime}/{variant} in this config")


def _strip(acfg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in acfg.items() if k not in ("seeds", "T_max", "T_min")}


def job_params(cfg: Mapping[str, Any], exp: str, regime: str, variant: str, T: int, seed: int) -> dict[str, Any]:
    """Everything one simulation job depends on — and nothing else."""
    env = dict(cfg["env"])
    common = {"lam": cfg["lam"], "delta": cfg["delta"]}
    if exp == "main":
        algo = variant
        reg = dict(cfg["regimes"][regime])
        algo_params = {**common, **_strip(cfg["algorithms"][algo])}
        betas = list(cfg["betas"])
    elif exp == "glm":
        g = cfg["glm"]
        algo = variant
        reg = {"K": g["K"], "d": g["d"]}
        env = {**env, "S": g["S"], "reward_model": "logistic"}
        algo_params = {**common, **_strip(g["algorithms"][algo])}
        betas = [g["beta"]]
    elif exp == "budget":
        b = cfg["budget"]
        algo, _, knob = variant.partition("-")
        reg = dict(cfg["regimes"][regime])
        base = _strip(cfg["algorithms"].get(algo, {}))
        val: Any = int(knob[1:]) if knob.startswith("M") else float(knob[1:])
        algo_params = {**common, **base, knob[0]: val}
        betas = [b["beta"]]
    else:
        raise ValueError(f"unknown experiment {exp!r}")
    if algo not in ("linucb", "rs_oful", "glm_ucb_ons", "rs_glm"):
        algo_params.setdefault("grid", cfg["grid"])
        if cfg["M"] is not None and exp != "budget":
            algo_params.setdefault("M", cfg["M"])
    return {"exp": exp, "regime": regime, "variant": variant, "algo": algo, "K": reg["K"], "d": reg["d"], "T": T,
            "seed": seed, "env": env, "algo_params": algo_params, "betas": betas,
            "beta_mode": cfg["beta_mode"], "c_beta": cfg["c_beta"]}
