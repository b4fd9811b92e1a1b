"""Config loading and validation: the one home of every parameter.

The schema is `workflow/schemas/config.schema.yaml` (global keys) plus one file per study in
`workflow/schemas/studies/<study>.schema.yaml`; the study file becomes the schema of the
top-level key `<study>`. Validation fills schema defaults into the config, so code never repeats
a default. Errors name the key and the file in one message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from paperflow.core.resources import RESOURCES_SCHEMA

REPO_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"


class ConfigError(ValueError):
    """A config file does not satisfy the schema. The message names the key and the file."""


def load_schema(schema_dir: Path = SCHEMA_DIR) -> dict[str, Any]:
    """The full config schema: global schema with each study's schema under its key."""
    schema = yaml.safe_load((schema_dir / "config.schema.yaml").read_text())
    props = schema.setdefault("properties", {})
    for f in sorted((schema_dir / "studies").glob("*.schema.yaml")):
        study = f.name.removesuffix(".schema.yaml")
        sub = yaml.safe_load(f.read_text())
        sub.pop("$schema", None)  # a nested $schema switches dialect and silently disables default-filling
        sub.setdefault("default", {})  # a config that omits a study gets it with its defaults (disabled)
        # every study takes `resources` (one definition: RESOURCES_SCHEMA); a study file may only name
        # its stages there (`resources: {propertyNames: {enum: [...]}}`)
        sprops = sub.setdefault("properties", {})
        own = sprops.get("resources") or {}
        sprops["resources"] = {**RESOURCES_SCHEMA, **{k: own[k] for k in ("propertyNames",) if k in own}}
        _module_enums(sub)
        props[study] = sub
    return schema


ENUM_MODULES_KEY = "x-enum-modules"


def _module_enums(node: Any) -> None:
    """Replace `x-enum-modules: paperflow.<study>.methods` anywhere in a schema with an `enum` of that
    package's module names (discovered from the files, without importing them): a method is one file,
    and the schema's list of valid names comes from the registry package itself."""
    import pkgutil
    from importlib.util import find_spec

    if isinstance(node, dict):
        pkg = node.pop(ENUM_MODULES_KEY, None)
        if pkg is not None:
            spec = find_spec(pkg)
            if spec is None or not spec.submodule_search_locations:
                raise ConfigError(f"schema error: {ENUM_MODULES_KEY} names {pkg!r}, which is not a package")
            names = sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)
                           if not m.name.startswith("_"))
            node["enum"] = names
        for v in node.values():
            _module_enums(v)
    elif isinstance(node, list):
        for v in node:
            _module_enums(v)


def study_names(schema_dir: Path = SCHEMA_DIR) -> list[str]:
    return sorted(f.name.removesuffix(".schema.yaml") for f in (schema_dir / "studies").glob("*.schema.yaml"))


def _extend_with_default(validator_class: type) -> type:
    """A validator that also writes `default` values into the instance (objects only)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = json.loads(json.dumps(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_DefaultingValidator = _extend_with_default(jsonschema.Draft202012Validator)


def _key_path(err: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in err.absolute_path)
    if err.validator == "additionalProperties":
        # name the offending key itself, not its parent
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        if extra:
            path = ".".join(filter(None, [path, extra[0]]))
    return path or "<top level>"


def validate_config(config: dict[str, Any], source: str = "<config>", schema: dict | None = None) -> dict[str, Any]:
    """Validate `config` in place (filling defaults) and return it; raise ConfigError naming the key."""
    schema = schema if schema is not None else load_schema()
    validator = _DefaultingValidator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        err = jsonschema.exceptions.best_match(errors) or errors[0]
        key = _key_path(err)
        if err.validator == "additionalProperties":
            msg = f"unknown key '{key}'"
        else:
            msg = f"bad value for '{key}': {err.message}"
        raise ConfigError(f"config error in {source}: {msg}")
    return config


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read a YAML config file, apply dotted-key overrides, validate, fill defaults."""
    path = Path(path)
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config error in {path}: not valid YAML: {e}") from e
    for dotted, value in (overrides or {}).items():
        set_dotted(cfg, dotted, value)
    return validate_config(cfg, str(path))


def set_dotted(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    node = cfg
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


def enabled_studies(config: Mapping[str, Any]) -> list[str]:
    return [s for s in study_names() if isinstance(config.get(s), Mapping) and config[s].get("enabled", False)]


def config_hash(obj: Any) -> str:
    """Stable short hash of any JSON-serialisable object (sorted keys)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
