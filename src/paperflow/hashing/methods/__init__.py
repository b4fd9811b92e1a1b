"""The hashing method registry: one module per method (plain, small_loss, label_smooth, rfcmh,
rfcmh_paper, ...), each registering a :class:`Method` in :data:`METHODS`.

A method declares
- `config_keys`: its parameters, as `name -> dotted key of the hashing config` (the values and their
  defaults live in `workflow/schemas/studies/hashing.schema.yaml`, the one home of every parameter);
  the planner copies exactly these into the training job's `method_params`;
- `loss(batch)`: the training loss of one batch (a :class:`Batch`);
- optional hooks: `candidates(mp)` (hyper-parameter candidates the selection rule picks among, e.g.
  label smoothing's ε), `before_epoch(...)` (per-epoch sample selection, e.g. small-loss),
  `reliability(...)` (per-pair reliability weights, logged as a diagnostic after `warmup_key` epochs);
- `role`: "proposed", "baseline" or "variant" (the report compares the proposed method with the
  baselines that ran; variants get their own rows but are no competitor);
- `only_bits_key` / `only_modes_key`: config lists restricting where the method runs (else everywhere);
- `extra_inputs`: files the method needs beyond the shared train/val splits and noise records (none of
  the current methods needs any; a method that does must get a rule input for them).

Adding a method = one module here + its name in `hashing.grid.methods` (+ its test): the schema's
method enum is this package's module list (`x-enum-modules`), the rules' wildcard constraint and the
planner read the registry. Modules import torch only inside their hooks.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from paperflow.core.registry import Registry


@dataclass
class Batch:
    """Everything a method's loss may use for one training batch."""

    epoch: int  # 1-based
    z1: Any  # image embeddings (B, L)
    z2: Any  # text embeddings (B, L)
    y: Any  # noisy labels (B, K), int64
    idx: Any  # row indices of the batch in the training split
    W: Any  # fixed class prototypes (L, K)
    mp: Mapping[str, Any]  # the method's parameters (its `config_keys`)
    multilabel: bool
    cand: Mapping[str, Any]  # the hyper-parameter candidate being trained ({} for most methods)
    clean_mask: Any  # bool (N,): pairs a selection hook kept (all True without one)


@dataclass(frozen=True)
class Method:
    name: str
    loss: Callable[[Batch], Any]
    config_keys: Mapping[str, str]
    role: str = "baseline"
    order: int = 100  # position in tables and figures
    candidates: Callable[[Mapping[str, Any]], list[dict[str, Any]]] | None = None
    before_epoch: Callable[..., Any] | None = None
    reliability: Callable[..., Any] | None = None
    warmup_key: str | None = None  # method param: epochs before diagnostics of `reliability` start
    only_bits_key: str | None = None
    only_modes_key: str | None = None
    extra_inputs: tuple[str, ...] = field(default_factory=tuple)

    def params(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """This method's parameters from the validated `hashing:` config section."""
        out: dict[str, Any] = {}
        for name, dotted in self.config_keys.items():
            node: Any = cfg
            for part in dotted.split("."):
                node = node[part]
            out[name] = list(node) if isinstance(node, (list, tuple)) else node
        return out

    def grid(self, mp: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self.candidates(mp) if self.candidates else [{}]

    def runs_at(self, cfg: Mapping[str, Any], bits: int, mode: str) -> bool:
        g = cfg["grid"]
        if self.only_bits_key and bits not in g[self.only_bits_key]:
            return False
        if self.only_modes_key and mode not in g[self.only_modes_key]:
            return False
        return True


METHODS: Registry[Method] = Registry("hashing method")


def register(m: Method) -> Method:
    METHODS.register(m.name)(m)
    return m


def get(name: str) -> Method:
    return METHODS[name]


def ordered(names: Any = None) -> list[str]:
    """Method names (all, or those in `names`) in table order."""
    pool = METHODS.names() if names is None else [n for n in set(names) if n in METHODS]
    return sorted(pool, key=lambda n: (METHODS[n].order, n))


for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")
