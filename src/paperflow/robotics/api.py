"""The public interface of the robotics study for other studies (robopolicy uses nothing else).

What it offers, and nothing more:
- the tabletop simulator (closed loop): `SimConfig`, `TabletopSim`, `ExpertPolicy`, `task_list`,
  `evaluate_policy` (= `sim.evaluate`), the closed instruction vocabulary (`COLORS`, `SHAPES`) and the
  template -> task-folder map `TEMPLATE_FOLDERS`;
- the dataset: `simulate_dataset` (simulator episodes -> Bridge V2 raw tree -> extracted multi-view
  Arrow dataset, in one call) and the reader side of the extracted format: `load_split`, `read_stats`,
  `normalize_actions`, `resize` (the extractor's own image resize, for closed-loop observations);
- the obstacle course of the same simulator (GAM's task, state-only): `course_sample_scene`,
  `course_record_demo` (the scripted expert, recorded), `course_reference_path`, `CourseScene`, `CoursePlant` (the blocking
  step driven by pose targets), `course_scene_from_json`, and `simulate_course_dataset` (recorded demos ->
  Bridge V2 raw tree -> extracted Arrow dataset, with the scene geometry beside it in `scenes.json`);
- the frozen conv stem every LAM here starts from: `FrozenStem`, `LAMConfig`;
- the ridge probe of spec c.4: `ridge_probe`.

Everything else in `paperflow.robotics` is internal and may change without notice. Heavy modules
(torch, datasets) are imported on first use of a name, so importing this module stays cheap.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# public name -> (internal module, attribute)
_EXPORTS: dict[str, tuple[str, str]] = {
    # simulator
    "SimConfig": ("sim", "SimConfig"),
    "TabletopSim": ("sim", "TabletopSim"),
    "ExpertPolicy": ("sim", "ExpertPolicy"),
    "task_list": ("sim", "task_list"),
    "evaluate_policy": ("sim", "evaluate"),
    "COLORS": ("sim", "COLORS"),
    "SHAPES": ("sim", "SHAPES"),
    "TEMPLATE_FOLDERS": ("simdata", "TEMPLATE_FOLDERS"),
    # obstacle course (GAM)
    "course_sample_scene": ("course", "sample_scene"),
    "course_record_demo": ("course", "record_demo"),
    "course_reference_path": ("course", "reference_path"),
    "course_scene_from_json": ("course", "scene_from_json"),
    "CourseScene": ("course", "Scene"),
    "course_rpy_to_R": ("course", "rpy_to_R"),
    "CoursePlant": ("course", "Plant"),
    # extracted dataset (reader side)
    "load_split": ("bridge", "load_split"),
    "normalize_actions": ("bridge", "normalize_actions"),
    "resize": ("bridge", "resize"),
    "read_stats": ("data", "read_stats"),
    # models / estimators shared with robopolicy
    "FrozenStem": ("model", "FrozenStem"),
    "LAMConfig": ("model", "LAMConfig"),
    "ridge_probe": ("mi", "ridge_probe"),
}

__all__ = sorted([*_EXPORTS, "simulate_dataset", "simulate_course_dataset"])


def __getattr__(name: str) -> Any:
    try:
        mod, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"paperflow.robotics.api has no {name!r} (public names: {', '.join(__all__)})") from None
    value = getattr(importlib.import_module(f"paperflow.robotics.{mod}"), attr)
    globals()[name] = value
    return value


def simulate_dataset(out: str | Path, sim: Mapping[str, Any], extract: Mapping[str, Any]) -> dict[str, Any]:
    """Simulator episodes written as a Bridge V2 raw tree (a scratch folder beside `out`, removed after),
    read back by the Bridge extractor into `out`. Returns {'counts': simulator counts, 'manifest':
    the extractor's manifest}. `sim` are `simdata.generate` parameters, `extract` the extractor's."""
    from paperflow.robotics.bridge import extract as run_extract
    from paperflow.robotics.simdata import generate

    out = Path(out)
    scratch = out.parent / f".{out.name}.raw_tree"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        counts = generate(scratch / "raw", dict(sim))
        man = run_extract(scratch / "raw", out, dict(extract))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"counts": counts, "manifest": man}


def simulate_course_dataset(out: str | Path, sessions: Mapping[str, list[tuple[Any, dict[str, Any]]]],
                            extract: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
    """Recorded obstacle-course demos ({session key: [(scene, course_record_demo output)]}) written as a
    Bridge V2 raw tree (fixed camera only; scratch folder beside `out`, removed after) and read back by the
    Bridge extractor into `out`. The scene geometry of every trajectory, which the tiny profile perceives from
    state and a Bridge trajectory does not carry, is written to `out/scenes.json`, keyed by the extracted
    episodes' `source_rel_path`. Returns {'episodes': n written, 'manifest': the extractor's manifest}."""
    import json

    from paperflow.robotics.bridge import extract as run_extract
    from paperflow.robotics.course import write_raw_tree

    out = Path(out)
    scratch = out.parent / f".{out.name}.raw_tree"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        index = write_raw_tree(scratch / "raw", dict(sessions), seed=seed)
        man = run_extract(scratch / "raw", out, dict(extract))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (out / "scenes.json").write_text(json.dumps(index, indent=1, sort_keys=True))
    return {"episodes": len(index), "manifest": man}
