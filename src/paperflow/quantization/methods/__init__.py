"""Weight-quantization methods: one file each, registered by the file's name (config:
`quantization.methods.<run>: {quantizer: <file name>, <option>: ...}`; the schema's `quantizer` enum is
this package's module list, `x-enum-modules`).

A method is a :class:`Method`: its options (a frozen dataclass whose field defaults are the option
defaults, so a method's config keys and defaults live in its file), what it needs (`needs_kotms`),
whether it writes a packed model (`packs`; `fp` does not), and `quantize(model, ctx) -> records`:
`model` has its decoder linears wrapped as QLinear (FP); the method may set rotations and must replace
each QLinear's weight by its dequantized quantized weight; `records[name]` is the TernaryLayer /
Int4Layer that gets packed. Method modules import torch inside `quantize` only: the workflow reads
their facts while it plans, without loading torch.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paperflow.core.registry import Registry

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Method:
    quantize: Callable[[Any, "MethodContext"], dict]
    options: type  # frozen dataclass: option names and their defaults
    needs_kotms: Callable[[Mapping[str, Any]], bool] = lambda options: False
    packs: bool = True  # writes a packed model dir (a `weights` job); False = evaluate the FP model


METHODS: Registry[Method] = Registry("quantization method")


@dataclass
class MethodContext:
    options: dict[str, Any]  # the run's resolved options (method defaults + config entry)
    params: dict[str, Any]  # job params (e2m settings, batch ...)
    seed: int
    calib: "torch.Tensor | None" = None  # [N, T] token windows (train split)
    kotms: "dict[str, tuple[torch.Tensor, torch.Tensor]] | None" = None  # linear -> (C, B)
    log: dict[str, Any] = field(default_factory=dict)


def resolve(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A `methods.<run>` config entry with the method's option defaults filled in:
    {"quantizer": name, **options}. Unknown options name the method and the option."""
    name = entry["quantizer"]
    method = METHODS[name]
    given = {k: v for k, v in entry.items() if k != "quantizer"}
    known = {f.name for f in dataclasses.fields(method.options)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"quantization method {name!r} has no option {unknown[0]!r} "
                         f"(options: {', '.join(sorted(known)) or 'none'})")
    return {"quantizer": name, **dataclasses.asdict(method.options(**given))}


def needs_kotms(entry: Mapping[str, Any]) -> bool:
    opts = resolve(entry)
    return METHODS[opts["quantizer"]].needs_kotms(opts)


def packs(entry: Mapping[str, Any]) -> bool:
    return METHODS[entry["quantizer"]].packs


def round_each_linear(model: Any, rounder: Callable[[Any], Any]) -> dict[str, Any]:
    """Replace every quantised linear's weight by `rounder(weight).dequant()`; the records by layer name
    (the plain round-to-nearest methods differ only in their rounder)."""
    from paperflow.quantization.qmodel import qlinears

    records = {}
    for name, lin in qlinears(model).items():
        rec = rounder(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    return records


def _register_all() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


_register_all()
