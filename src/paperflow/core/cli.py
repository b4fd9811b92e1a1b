"""Building blocks for study CLIs: every stage is `paperflow <study> <stage> [args]`.

A study package `paperflow.<name>` exposes `STUDIES: list[Study]` in its `cli` module. The module
must import heavy libraries (torch, transformers, ...) only inside stage functions, so that
`paperflow --help` and Snakemake's job start stay fast.

Stage config: rules pass the exact parameters a job depends on as `--params JSON` (so Snakemake
reruns a job exactly when they change). By hand, pass `--config FILE` (validated; defaults filled)
and the stage derives the same parameters through the same planning function.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paperflow.core.config import load_config

DEFAULT_CONFIG = "config/config.yaml"


@dataclass
class StageSpec:
    help: str
    add_args: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], None]


@dataclass
class Study:
    name: str
    help: str
    stages: dict[str, StageSpec] = field(default_factory=dict)

    def stage(self, name: str, help: str) -> Callable[[Callable[[argparse.ArgumentParser], None]], Callable]:
        """Decorator pair: `@study.stage("x", "help")` on an add_args fn returning the run fn."""

        def deco(add_args: Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], None]]) -> Callable:
            holder: dict[str, Any] = {}

            def _add(p: argparse.ArgumentParser) -> None:
                holder["run"] = add_args(p)

            self.stages[name] = StageSpec(help, _add, lambda ns: holder["run"](ns))
            return add_args

        return deco


def add_config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("configuration (one of)")
    g.add_argument("--params", help="JSON of this job's parameters (what rules pass)")
    g.add_argument("--config", default=None, help=f"config YAML to validate and read (default {DEFAULT_CONFIG})")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (dotted, YAML value), e.g. --set bandits.seeds=2")


def study_config(args: argparse.Namespace, study: str) -> dict[str, Any]:
    """The validated config section of `study` from --config/--set (for stages run by hand)."""
    overrides = {}
    for kv in args.set:
        key, _, val = kv.partition("=")
        import yaml

        overrides[key] = yaml.safe_load(val)
    cfg = load_config(args.config or DEFAULT_CONFIG, overrides)
    return cfg[study]


def job_params(args: argparse.Namespace, study: str, plan: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> dict[str, Any]:
    """--params if given, else `plan(study_config)`: the same parameters the rule would pass."""
    if args.params:
        return json.loads(args.params)
    return dict(plan(study_config(args, study)))


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def path_arg(s: str) -> Path:
    return Path(s)
