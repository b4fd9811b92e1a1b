"""The one CLI builder: every stage is `paperflow <study> <stage> [args]`, generated from its function.

A study is a package `paperflow.<pkg>` with a module `stages.py`. Each stage there is a plain function
decorated with :func:`stage`:

    @stage(plan=plan.train_params)
    def train(params: TrainParams, *, train: Path, val: Path, out: Path) -> dict:
        \"\"\"Train one run; write weights to `out`.\"\"\"

From its signature the CLI gets
- `params` (a TypedDict or dataclass of the job's parameters): `--params JSON` (what rules pass), or,
  by hand, `--config FILE [--set key=value ...]` plus the *coordinates* of the plan function (its
  arguments after the study config, e.g. `--dataset --method --seed`); the same plan function the
  rule uses derives the parameters, so both ways run the same job. Without `plan`, `params` is the
  study's whole validated config section.
- every other argument: a `--name` option (underscores become dashes) typed by its annotation
  (`Path`, `str`, `int`, `float`, `bool`, `list[Path]`); required unless it has a default. A list
  argument named `inputs` is positional (`paperflow bandits aggregate --out m.json cells/*.json`).

The runner sets up logging and torch threads (one place: :func:`setup_threads`) before calling the
function. Stage modules import heavy libraries (torch, transformers) inside functions or lazily, so
that `paperflow --help` and job start stay fast; only the chosen study's `stages` module is imported
to run a stage.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import logging
import os
import pkgutil
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paperflow.core.config import load_config

DEFAULT_CONFIG = "config/config.yaml"
STAGE_ATTR = "__paperflow_stage__"
# subpackages of paperflow that are not studies
NON_STUDY_PACKAGES = {"core", "nn"}


@dataclass(frozen=True)
class StageInfo:
    name: str
    func: Callable[..., Any]
    plan: Callable[..., Mapping[str, Any]] | None
    help: str
    study_key: str | None  # config section the plan reads (default: the study's name)


def stage(name: str | None = None, *, plan: Callable[..., Mapping[str, Any]] | None = None,
          help: str | None = None, config_section: str | None = None) -> Callable[[Callable], Callable]:
    """Mark a function of a study's `stages.py` as a CLI stage (the function itself is unchanged)."""

    def deco(func: Callable) -> Callable:
        doc = (help or inspect.getdoc(func) or "").strip().splitlines()
        setattr(func, STAGE_ATTR, StageInfo(name or func.__name__, func, plan, doc[0] if doc else "",
                                            config_section))
        return func

    return deco


@dataclass(frozen=True)
class StudyModule:
    name: str
    help: str
    module: str  # dotted path of the stages module

    def stages(self) -> dict[str, StageInfo]:
        mod = importlib.import_module(self.module)
        return stages_of(mod)


def stages_of(mod: types.ModuleType) -> dict[str, StageInfo]:
    """The stages a module declares, in source order."""
    found = [getattr(obj, STAGE_ATTR) for obj in vars(mod).values()
             if callable(obj) and hasattr(obj, STAGE_ATTR) and getattr(obj, "__module__", None) == mod.__name__]
    found.sort(key=lambda s: inspect.getsourcelines(s.func)[1])
    return {s.name: s for s in found}


def discover() -> dict[str, StudyModule]:
    """Every study: each subpackage of paperflow that has a `stages` module (imported lazily).

    The study's name is the package's `STUDY_NAME` in `stages.py` if set, else the package name;
    its help is the first line of the `stages` module docstring (read without importing it).
    """
    import paperflow

    studies: dict[str, StudyModule] = {}
    for mod in pkgutil.iter_modules(paperflow.__path__):
        if not mod.ispkg or mod.name in NON_STUDY_PACKAGES:
            continue
        stages_file = Path(paperflow.__path__[0]) / mod.name / "stages.py"
        if not stages_file.exists():
            continue
        name, help_ = _peek(stages_file, mod.name)
        studies[name] = StudyModule(name, help_, f"paperflow.{mod.name}.stages")
    return studies


def _peek(path: Path, default_name: str) -> tuple[str, str]:
    """Study name and help from a stages.py without importing it (keeps `paperflow --help` fast)."""
    import ast

    tree = ast.parse(path.read_text())
    doc = (ast.get_docstring(tree) or "").strip().splitlines()
    name = default_name
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "STUDY_NAME" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                name = node.value.value
    return name, (doc[0] if doc else "")


# ---- argument generation ---------------------------------------------------------------------------

def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
        if set(args) <= {str, Path}:
            return Path, len(args) < len(typing.get_args(tp))
    return tp, False


def _converter(tp: Any) -> tuple[Callable[[str], Any], bool]:
    """(conversion of one CLI string, is-a-list) for an annotation."""
    tp, _ = _unwrap_optional(tp)
    origin = typing.get_origin(tp)
    if origin in (list, tuple, typing.Sequence) or (origin is not None and getattr(origin, "__name__", "") == "Sequence"):
        args = typing.get_args(tp)
        inner = _converter(args[0])[0] if args else str
        return inner, True
    if tp in (Path,) or tp is os.PathLike:
        return Path, False
    if tp in (int, float, str):
        return tp, False
    return str, False


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_param(p: argparse.ArgumentParser, name: str, param: inspect.Parameter, hint: Any) -> None:
    conv, is_list = _converter(hint)
    base, _ = _unwrap_optional(hint)
    required = param.default is inspect.Parameter.empty
    default = None if required else param.default
    if base is bool:
        p.add_argument(_opt(name), dest=name, action=argparse.BooleanOptionalAction, default=default,
                       required=required)
    elif is_list and name == "inputs":
        p.add_argument(name, nargs="+" if required else "*", type=conv, default=default)
    elif is_list:
        p.add_argument(_opt(name), dest=name, nargs="+" if required else "*", type=conv, default=default,
                       required=required)
    else:
        p.add_argument(_opt(name), dest=name, type=conv, default=default, required=required)


def _coordinates(plan: Callable[..., Any]) -> list[tuple[str, inspect.Parameter, Any]]:
    """The plan function's arguments after the study config: the job's coordinates."""
    params = list(inspect.signature(plan).parameters.values())[1:]
    hints = _hints(plan)
    return [(q.name, q, hints.get(q.name, str)) for q in params
            if q.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception:  # unresolvable forward refs: fall back to raw annotations
        return {k: v for k, v in getattr(func, "__annotations__", {}).items() if not isinstance(v, str)}


def _pct(text: str | None) -> str | None:
    """Help text as argparse wants it: a literal '%' (docstrings say "95% CI") is written '%%'."""
    return None if text is None else text.replace("%", "%%")


def build_stage_parser(p: argparse.ArgumentParser, info: StageInfo) -> None:
    """Add the arguments of one stage function (and its plan's coordinates) to `p`."""
    sig = inspect.signature(info.func)
    hints = _hints(info.func)
    for name, param in sig.parameters.items():
        if name == "params":
            g = p.add_argument_group("configuration (--params, or --config/--set [+ coordinates])")
            g.add_argument("--params", dest="params", help="JSON of this job's parameters (what rules pass)")
            g.add_argument("--config", dest="config", default=None,
                           help=f"config YAML to validate and plan from (default {DEFAULT_CONFIG})")
            g.add_argument("--set", dest="set", action="append", default=[], metavar="KEY=VALUE",
                           help="override a config key (dotted, YAML value), e.g. --set bandits.seeds=2")
            if info.plan is not None:
                for cname, cparam, chint in _coordinates(info.plan):
                    conv, _ = _converter(chint)
                    cdefault = None if cparam.default is inspect.Parameter.empty else cparam.default
                    g.add_argument(_opt(cname), dest=f"coord_{cname}", type=conv, default=cdefault, metavar=cname.upper(),
                                   help="coordinate (with --config)")
            continue
        _add_param(p, name, param, hints.get(name, str))


def config_section(config: str | None, overrides: list[str], section: str) -> dict[str, Any]:
    """The validated config section `section` of --config (+ --set overrides)."""
    import yaml

    sets = {}
    for kv in overrides:
        key, sep, val = kv.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {kv!r}")
        sets[key] = yaml.safe_load(val)
    cfg = load_config(config or DEFAULT_CONFIG, sets)
    return cfg[section]


def resolve_params(info: StageInfo, study: str, ns: argparse.Namespace) -> Any:
    """--params JSON if given, else the plan function on the validated config (the rule's own values)."""
    if ns.params:
        if ns.config or ns.set:
            raise SystemExit("give either --params or --config/--set, not both")
        raw = json.loads(ns.params)
    else:
        section = config_section(ns.config, ns.set, info.study_key or study)
        if info.plan is None:
            raw = section
        else:
            kwargs = {}
            for cname, cparam, _ in _coordinates(info.plan):
                val = getattr(ns, f"coord_{cname}")
                if val is None and cparam.default is inspect.Parameter.empty:
                    raise SystemExit(f"--{cname.replace('_', '-')} is required with --config "
                                     f"(the job's coordinate for {info.plan.__name__})")
                kwargs[cname] = val
            raw = dict(info.plan(section, **kwargs))
    ptype = _hints(info.func).get("params")
    if ptype is not None and dataclasses.is_dataclass(ptype):
        return ptype(**raw)
    return raw


def run_stage(study: str, info: StageInfo, ns: argparse.Namespace) -> Any:
    setup_threads()
    kwargs: dict[str, Any] = {}
    for name in inspect.signature(info.func).parameters:
        if name == "params":
            kwargs[name] = resolve_params(info, study, ns)
        else:
            kwargs[name] = getattr(ns, name)
    return info.func(**kwargs)


def setup_threads() -> None:
    """One BLAS/OpenMP/torch thread count for every stage: OMP_NUM_THREADS (default 1 — jobs run side by
    side on shared cores). Set in the environment before any heavy import (torch and BLAS read it when
    they load); torch is configured directly only if it is already imported — importing it here would add
    seconds to every numpy-only job."""
    n = max(1, int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    os.environ.setdefault("MKL_NUM_THREADS", str(n))
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# ---- entry point -----------------------------------------------------------------------------------

def _top_parser(studies: Mapping[str, Any]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paperflow", description="paperflow: every stage of every study, by hand")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd", metavar="{studies,config,<study>}")
    sub.add_parser("studies", help="list studies and their stages")
    pc = sub.add_parser("config", help="validate a config file and print it with defaults filled")
    pc.add_argument("file")
    for name, st in sorted(studies.items()):
        sp = sub.add_parser(name, help=_pct(st.help), add_help=False)
        sp.add_argument("stage_argv", nargs=argparse.REMAINDER)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    studies = discover()
    verbose = False
    while argv and argv[0] in ("-v", "--verbose"):
        verbose = True
        argv = argv[1:]
    if argv and argv[0] in studies:  # `paperflow <study> ...`: the study's own parser gets the rest (incl. --help)
        args = argparse.Namespace(cmd=argv[0], stage_argv=argv[1:], verbose=verbose)
    else:
        top = _top_parser(studies)
        args = top.parse_args(argv)
        args.verbose = args.verbose or verbose
    setup_logging(args.verbose)
    if args.cmd is None:
        _top_parser(studies).print_help()
        return 0
    if args.cmd == "studies":
        for name, st in sorted(studies.items()):
            print(f"{name}: {st.help}")
            for stage_name, info in (st.stages().items()):
                print(f"  {stage_name:<18} {info.help}")
        return 0
    if args.cmd == "config":
        import yaml

        from paperflow.core.config import ConfigError

        try:
            cfg = load_config(args.file)
        except ConfigError as e:
            print(e, file=sys.stderr)
            return 2
        print(yaml.safe_dump(cfg, sort_keys=False))
        return 0
    st = studies[args.cmd]
    stages = st.stages()
    sp = argparse.ArgumentParser(prog=f"paperflow {st.name}", description=st.help)
    ssub = sp.add_subparsers(dest="stage", metavar="STAGE", required=True)
    for stage_name, info in stages.items():
        ssp = ssub.add_parser(stage_name, help=_pct(info.help), description=inspect.getdoc(info.func))
        build_stage_parser(ssp, info)
    ns = sp.parse_args(args.stage_argv)
    run_stage(st.name, stages[ns.stage], ns)
    return 0

