from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paperflow.core.config import ConfigError, enabled_studies, load_config, validate_config

REPO = Path(__file__).resolve().parents[2]


def _cfg(name: str = "test") -> dict:
    return yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", sorted(f.stem for f in (REPO / "config").glob("*.yaml")))
def test_shipped_configs_validate(name):
    cfg = load_config(REPO / "config" / f"{name}.yaml")
    assert cfg["results_dir"]


def test_omitted_studies_are_filled_and_disabled():
    """A config that names one study (config/unlearning_real.yaml) still gives every rule file its section."""
    cfg = validate_config({"unlearning": {"enabled": True}})
    assert {"bandits", "robotics", "fmri", "hashing", "quantization"} <= set(cfg)
    assert enabled_studies(cfg) == ["unlearning"]
    assert cfg["robotics"]["enabled"] is False


def test_defaults_filled_from_schema():
    cfg = validate_config({"bandits": {"enabled": True}})
    assert cfg["results_dir"] == "results"
    assert cfg["bandits"]["seeds"] == 5 and cfg["bandits"]["glm"]["T"] == 5000


def test_unknown_key_is_named_with_file():
    cfg = _cfg()
    cfg["bandits"]["algorithms"]["linucb"]["bogus_knob"] = 1
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, "config/test.yaml")
    msg = str(e.value)
    assert "config/test.yaml" in msg and "bandits.algorithms.linucb.bogus_knob" in msg


def test_wrong_type_and_value_are_named():
    cfg = _cfg()
    cfg["bandits"]["seeds"] = "five"
    with pytest.raises(ConfigError, match=r"bandits\.seeds"):
        validate_config(copy.deepcopy(cfg), "x.yaml")
    cfg = _cfg()
    cfg["bandits"]["env"] = {"context": "cube"}
    with pytest.raises(ConfigError, match=r"bandits\.env\.context"):
        validate_config(cfg, "x.yaml")


def test_unknown_top_level_key():
    with pytest.raises(ConfigError, match="unknown key 'bandit'"):
        validate_config({"bandit": {"enabled": True}}, "c.yaml")


def test_cli_config_command_reports_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    cfg = _cfg()
    cfg["bandits"]["T"] = [100, "many"]
    bad.write_text(yaml.safe_dump(cfg))
    p = subprocess.run([sys.executable, "-m", "paperflow.cli", "config", str(bad)], capture_output=True, text=True)
    assert p.returncode == 2
    assert "bandits.T.1" in p.stderr and str(bad) in p.stderr
