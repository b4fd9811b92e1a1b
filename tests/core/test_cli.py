from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "paperflow.cli", *args], capture_output=True, text=True, cwd=REPO)


def test_help_and_studies():
    p = _run("--help")
    assert p.returncode == 0 and "studies" in p.stdout
    p = _run("studies")
    assert p.returncode == 0
    assert "bandits:" in p.stdout and "simulate" in p.stdout and "summary" in p.stdout


def test_stage_runs_by_hand_from_config(tmp_path):
    out = tmp_path / "cell.json"
    p = _run("bandits", "simulate", "--config", "config/test.yaml", "--exp", "main", "--regime", "small_k", "--variant",
             "blce", "--T", "300", "--seed", "0", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert out.exists() and (tmp_path / "cell.json.manifest.json").exists()


# ---- the CLI builder, on stage functions defined here ------------------------------------------------
import argparse  # noqa: E402
import json  # noqa: E402
from typing import TypedDict  # noqa: E402

import pytest  # noqa: E402

from paperflow.core import cli as core_cli  # noqa: E402


class _P(TypedDict):
    n: int
    seed: int


def _plan(cfg, seed: int, scale: float = 1.0) -> _P:
    return {"n": int(cfg["seeds"] * scale), "seed": seed}


CALLS: list = []


@core_cli.stage(plan=_plan)
def _simulate(params: _P, *, out: Path, flag: bool = False, inputs: list[Path] | None = None) -> None:
    """Simulate one thing."""
    CALLS.append((params, out, flag, inputs))


@core_cli.stage("by-hand")
def _whole(params: dict, *, metrics: Path, k: int = 3) -> None:
    CALLS.append((params["seeds"], metrics, k))


def _parse(info, argv):
    p = argparse.ArgumentParser()
    core_cli.build_stage_parser(p, info)
    return p.parse_args(argv)


def test_builder_params_json_and_paths(tmp_path):
    CALLS.clear()
    info = getattr(_simulate, core_cli.STAGE_ATTR)
    assert info.name == "_simulate" and info.help == "Simulate one thing."
    ns = _parse(info, ["--params", json.dumps({"n": 2, "seed": 7}), "--out", str(tmp_path / "o"), "--flag", "a", "b"])
    core_cli.run_stage("bandits", info, ns)
    assert CALLS == [({"n": 2, "seed": 7}, tmp_path / "o", True, [Path("a"), Path("b")])]


def test_builder_config_plus_coordinates_uses_the_plan(tmp_path):
    CALLS.clear()
    info = getattr(_simulate, core_cli.STAGE_ATTR)
    ns = _parse(info, ["--config", str(REPO / "config/test.yaml"), "--set", "bandits.seeds=4", "--seed", "3",
                       "--scale", "0.5", "--out", "x"])
    core_cli.run_stage("bandits", info, ns)
    assert CALLS[0][0] == {"n": 2, "seed": 3}


def test_builder_missing_coordinate_and_mixed_modes_fail():
    info = getattr(_simulate, core_cli.STAGE_ATTR)
    with pytest.raises(SystemExit, match="--seed is required"):
        core_cli.run_stage("bandits", info, _parse(info, ["--config", str(REPO / "config/test.yaml"), "--out", "x"]))
    with pytest.raises(SystemExit, match="either --params"):
        core_cli.run_stage("bandits", info, _parse(info, ["--params", "{}", "--config", "c.yaml", "--out", "x"]))
    with pytest.raises(SystemExit):  # --out is required
        _parse(info, ["--params", "{}"])


def test_builder_without_plan_passes_the_config_section():
    CALLS.clear()
    info = getattr(_whole, core_cli.STAGE_ATTR)
    assert info.name == "by-hand"
    ns = _parse(info, ["--config", str(REPO / "config/test.yaml"), "--set", "bandits.seeds=5", "--metrics", "m",
                       "--k", "9"])
    core_cli.run_stage("bandits", info, ns)
    assert CALLS == [(5, Path("m"), 9)]


def test_every_study_is_on_stage_functions():
    """No study keeps an argparse cli.py: every stage is generated from its stages.py."""
    import paperflow

    pkg = Path(paperflow.__path__[0])
    legacy = sorted(p.parent.name for p in pkg.glob("*/cli.py") if p.parent.name != "core")
    assert legacy == [], f"studies still on argparse cli.py: {legacy}"
    studies = core_cli.discover()
    assert {"bandits", "fdiv", "fmri", "hashing", "lm", "quantization", "report", "robopolicy", "robotics",
            "unlearning"} <= set(studies)
    for name, st in studies.items():
        assert st.stages(), f"{name} declares no stage"


def test_study_and_stage_help():
    for args in (["bandits", "--help"], ["-v", "bandits", "simulate", "--help"]):
        p = _run(*args)
        assert p.returncode == 0 and "usage: paperflow bandits" in p.stdout, p.stderr


def test_setup_threads_does_not_import_torch():
    """numpy-only stages must not pay torch's import (≈ 1.5 s per job); torch reads OMP_NUM_THREADS itself."""
    code = ("import os, sys; os.environ['OMP_NUM_THREADS'] = '1'; from paperflow.core.cli import setup_threads; "
            "setup_threads(); assert 'torch' not in sys.modules; import torch; setup_threads(); "
            "assert torch.get_num_threads() == 1; print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_every_study_and_stage_help_renders(capsys):
    """argparse formats help with '%': a docstring saying "95% CI" once crashed `paperflow hyper_icl --help`."""
    import pytest

    from paperflow.core.cli import discover, main

    for name, st in sorted(discover().items()):
        for argv in ([name, "--help"], *([name, stage, "--help"] for stage in st.stages())):
            with pytest.raises(SystemExit) as e:
                main(argv)
            assert e.value.code == 0, argv
            assert f"usage: paperflow {name}" in capsys.readouterr().out
