"""Unlearning methods: one file each, registered by its module name in METHODS.

Every method minimizes gamma * L_f(forget batch) + alpha * L_r(retain batch) with L_r = answer-token
cross-entropy unless the method overrides `retain_loss`. A method class owns its facts: the
hyperparameters it takes and their defaults (`defaults`, the spec's [ou] values). The config entry
`unlearning.methods.<name>` ({loss: <module name>, beta, alpha, gamma, delta, layer, steering_coef, lr,
max_steps}) overrides them; a configured value is used as given (0 stays 0), `null` means "the class
default", and a hyperparameter the method does not take raises instead of being silently ignored.

Adding a method = one module here (registered under its file name, which is also the schema's enum of
`loss` through `x-enum-modules`) + one config entry (+ its test). Modules are discovered, not listed.
RULE is not a loss but a post-hoc procedure on top of one (`paperflow.unlearning.rule`).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, ClassVar

from paperflow.core.registry import Registry

METHODS: Registry[type["Method"]] = Registry("unlearning method")
# config keys of a method entry that are not loss hyperparameters (read by the training plan)
NON_HYPER = ("loss", "lr", "max_steps", "seed_u")


class Method:
    needs_ref: ClassVar[bool] = False  # whether a frozen reference model (the starting checkpoint) is used
    # every hyperparameter the method takes, with its default (subclasses extend or replace)
    defaults: ClassVar[dict[str, float]] = {"gamma": 1.0, "alpha": 1.0}
    # hyperparameters fixed by the method's definition (a configured different value raises)
    fixed: ClassVar[dict[str, float]] = {}

    def __init__(self, params: dict[str, Any], ref_model=None) -> None:
        name = params.get("loss", type(self).__name__)
        hp: dict[str, Any] = dict(self.defaults)
        for k, v in params.items():
            if k in NON_HYPER or v is None:
                continue
            if k in self.fixed:
                if float(v) != float(self.fixed[k]):
                    raise ValueError(f"unlearning method '{name}': {k} is fixed to {self.fixed[k]} by its "
                                     f"definition, got {v}")
                continue
            if k not in hp:
                raise ValueError(f"unlearning method '{name}' takes no '{k}' (it takes: "
                                 f"{', '.join(sorted(hp)) or 'nothing'}); remove it from the config entry")
            hp[k] = v
        hp.update(self.fixed)
        self.hp = hp
        self.seed_u = int(params.get("seed_u", 0) or 0)
        self.ref = ref_model
        self.gamma = float(hp.get("gamma", 1.0))
        self.alpha = float(hp.get("alpha", 0.0))
        self.validate()

    def validate(self) -> None:
        """Reject hyperparameter values the loss is undefined for (subclasses)."""

    def forget_loss(self, model, fb):  # pragma: no cover - abstract
        raise NotImplementedError

    def retain_loss(self, model, rb):
        from paperflow.unlearning.model import mean_ce

        return mean_ce(model, rb)

    def loss(self, model, fb, rb) -> tuple[Any, dict[str, float]]:
        lf = self.forget_loss(model, fb)
        total = self.gamma * lf
        logs = {"L_f": float(lf.detach())}
        if self.alpha:
            lr = self.retain_loss(model, rb)
            total = total + self.alpha * lr
            logs["L_r"] = float(lr.detach())
        logs["loss"] = float(total.detach())
        return total, logs


def build_method(params: dict[str, Any], ref_model=None) -> Method:
    import_all()
    return METHODS[params["loss"]](params, ref_model)


def module_names() -> list[str]:
    """The method modules of this package (= the registry names = the schema's enum)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def import_all() -> None:
    """Import every method module (each registers itself)."""
    for name in module_names():
        importlib.import_module(f"{__name__}.{name}")
