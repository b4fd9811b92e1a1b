"""Hydra-Nav: adaptive slow/fast triggering for object navigation in a gridworld of typed rooms.

Stages (spec vision_language_b.md §8; everything beyond the abstract is a reconstruction):
data (houses as ObjectNav-style episode files) → irft (per seed: filtered-round training of the learned
trigger for every slow-call cost, then its evaluation on the test houses) and baselines (the fixed
policies (a)–(d) on the same test houses, several per job) → aggregate → figures, summary.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.hydra_nav import plan

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    houses: dict[str, Any]
    train: int
    test: int
    seed: int


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, int]:
    """Write <out>/train.json and <out>/test.json: one ObjectNav-style episode per generated house."""
    from paperflow.core.io import atomic_path
    from paperflow.hydra_nav.house import make_episodes, write_episodes

    counts = {}
    with Stage("hydra_nav.data", config=params, outputs=[out], seed=params["seed"]) as st:
        with atomic_path(out) as tmp:
            tmp.mkdir(parents=True)
            for split in plan.SPLITS:
                ds = make_episodes(params["houses"], int(params[split]), split, int(params["seed"]))  # type: ignore[literal-required]
                write_episodes(tmp / f"{split}.json", ds)
                counts[split] = len(ds["episodes"])
        st.metrics = counts
    return counts


def _env(path: Path, p: dict[str, Any]) -> Any:
    import gymnasium as gym

    from paperflow.hydra_nav.env import ENV_ID, register
    from paperflow.hydra_nav.house import load_episodes

    register()
    return gym.make(ENV_ID, episodes=load_episodes(path), view_radius=int(p["view_radius"]),
                    max_steps=int(p["max_steps"]), disable_env_checker=True)


class IrftParams(TypedDict):
    view_radius: int
    max_steps: int
    lam: float
    stagnation_m: int
    move_cost: float
    decision_cost: float
    rounds: int
    episodes_per_round: int
    p0: float
    keep_share: float
    l2: float
    prior_correction: bool
    costs: list[float]
    seed: int


@stage(plan=plan.irft_params)
def irft(params: IrftParams, *, episodes: Path, model: Path, out: Path) -> dict[str, Any]:
    """Train the learned trigger (e) of one seed for every cost (rounds → `model`), then roll it out on
    every test house (per-episode records per cost → `out`)."""
    from paperflow.core.seeding import stream
    from paperflow.hydra_nav.agent import Logistic, run_episode
    from paperflow.hydra_nav.irft import train_irft

    seed = int(params["seed"])
    p = dict(params)
    inputs = [episodes / "train.json", episodes / "test.json"]
    with Stage("hydra_nav.irft", config=params, outputs=[model, out], inputs=inputs, seed=seed) as st:
        trained = train_irft(_env(episodes / "train.json", p), p, seed)
        write_json(model, trained)
        env = _env(episodes / "test.json", p)
        n = len(env.unwrapped.dataset["episodes"])
        records = {}
        for cost, res in trained["costs"].items():
            trig = Logistic.from_dict(res["model"])
            records[cost] = [run_episode(env, i, trig, stream(seed, "test", cost, i), lam=p["lam"],
                                         stag_m=p["stagnation_m"]).record() for i in range(n)]
        write_json(out, {"policy": "irft", "seed": seed, "records": records})
        st.metrics = {c: {"sr": sum(r["success"] for r in rs) / n, "calls": sum(r["slow_calls"] for r in rs) / n}
                      for c, rs in records.items()}
        log.info("irft s%d: %s", seed, st.metrics)
    return st.metrics


class BaselinesParams(TypedDict):
    view_radius: int
    max_steps: int
    lam: float
    stagnation_m: int
    move_cost: float
    decision_cost: float
    group: int
    policies: dict[str, dict[str, Any]]
    seed: int


@stage(plan=plan.baselines_params)
def baselines(params: BaselinesParams, *, episodes: Path, out: Path) -> dict[str, Any]:
    """Roll out a group of fixed policies (a)–(d) on every test house (per-episode records → `out`)."""
    from paperflow.core.seeding import stream
    from paperflow.hydra_nav.agent import make_trigger, run_episode

    p = dict(params)
    with Stage("hydra_nav.baselines", config=params, outputs=[out], inputs=[episodes / "test.json"],
               seed=params["seed"]) as st:
        env = _env(episodes / "test.json", p)
        n = len(env.unwrapped.dataset["episodes"])
        records = {}
        for name, spec in params["policies"].items():
            trig = make_trigger(spec)
            records[name] = [run_episode(env, i, trig, stream(int(params["seed"]), "test", name, i), lam=p["lam"],
                                         stag_m=p["stagnation_m"]).record() for i in range(n)]
        write_json(out, {"group": params["group"], "records": records})
        st.metrics = {k: {"sr": sum(r["success"] for r in rs) / n, "calls": sum(r["slow_calls"] for r in rs) / n}
                      for k, rs in records.items()}
        log.info("baselines %d: %s", params["group"], st.metrics)
    return st.metrics


@stage()
def aggregate(params: dict[str, Any], *, out: Path, irft: list[Path] | None = None,
              baselines: list[Path] | None = None, models: list[Path] | None = None) -> dict[str, Any]:
    """Collect every rollout into metrics.json: per policy × cost the per-episode metrics (seeds × houses)
    and their means, the SOT-vs-cost curve, the learned trigger's training rounds (params: the config section)."""
    from paperflow.hydra_nav.report import aggregate_runs

    irft, baselines, models = list(irft or []), list(baselines or []), list(models or [])
    with Stage("hydra_nav.aggregate", config=params, outputs=[out], inputs=[*irft, *baselines, *models]) as st:
        metrics = aggregate_runs([read_json(f) for f in baselines], [read_json(f) for f in irft],
                                 [read_json(f) for f in models], params)
        write_json(out, metrics)
        st.metrics = {"table": metrics["table"]}
    return metrics


@stage()
def figures(*, metrics: Path, outdir: Path) -> list[Path]:
    """SOT vs slow-call cost (with SR and calls per episode beside it)."""
    from paperflow.hydra_nav.figures import FIGURES, make_all

    outs = [Path(outdir) / n for n in FIGURES]
    with Stage("hydra_nav.figures", config={}, outputs=outs, inputs=[metrics]):
        return make_all(read_json(metrics), outdir)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers with seeds and CIs, verdicts (params: the config section)."""
    from paperflow.hydra_nav.report import write

    write(read_json(metrics), params, out, [str(metrics)])
