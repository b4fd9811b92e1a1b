"""`paperflow` command line: `paperflow studies`, `paperflow <study> <stage> ...`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import paperflow
from paperflow.core.cli import Study, setup_logging

NON_STUDY_PACKAGES = {"core"}


def discover() -> dict[str, Study]:
    """All studies: every subpackage of paperflow with a `cli` module exposing STUDIES."""
    studies: dict[str, Study] = {}
    for mod in pkgutil.iter_modules(paperflow.__path__):
        if not mod.ispkg or mod.name in NON_STUDY_PACKAGES:
            continue
        try:
            cli_mod = importlib.import_module(f"paperflow.{mod.name}.cli")
        except ModuleNotFoundError as e:
            if e.name == f"paperflow.{mod.name}.cli":
                continue
            raise
        for st in getattr(cli_mod, "STUDIES", []):
            studies[st.name] = st
    return studies


def build_parser(studies: dict[str, Study]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paperflow", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd", metavar="{studies,config,<study>}")
    sub.add_parser("studies", help="list studies and their stages")
    pc = sub.add_parser("config", help="validate a config file and print it with defaults filled")
    pc.add_argument("file")
    for name, st in sorted(studies.items()):
        sp = sub.add_parser(name, help=st.help)
        stage_sub = sp.add_subparsers(dest="stage", metavar="STAGE", required=True)
        for stage_name, spec in st.stages.items():
            ssp = stage_sub.add_parser(stage_name, help=spec.help, description=spec.help)
            spec.add_args(ssp)
            ssp.set_defaults(_run=spec.run)
    return p


def main(argv: list[str] | None = None) -> int:
    studies = discover()
    parser = build_parser(studies)
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    if args.cmd is None:
        parser.print_help()
        return 0
    if args.cmd == "studies":
        for name, st in sorted(studies.items()):
            print(f"{name}: {st.help}")
            for stage_name, spec in st.stages.items():
                print(f"  {stage_name:<14} {spec.help}")
        return 0
    if args.cmd == "config":
        import yaml

        from paperflow.core.config import ConfigError, load_config

        try:
            cfg = load_config(args.file)
        except ConfigError as e:
            print(e, file=sys.stderr)
            return 2
        print(yaml.safe_dump(cfg, sort_keys=False))
        return 0
    args._run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
