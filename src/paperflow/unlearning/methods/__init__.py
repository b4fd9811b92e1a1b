"""Unlearning methods: one file each, registered by name in METHODS.

Every method minimizes gamma * L_f(forget batch) + alpha * L_r(retain batch) with L_r = answer-token
cross-entropy unless the method overrides `retain_loss`. Hyperparameters come from the config entry
`unlearning.methods.<name>` ({loss: <registry name>, beta, alpha, gamma, delta, layer, steering_coef, lr}).
RULE (rule.py) is a post-hoc procedure on top of a base method's forget loss.
"""

from __future__ import annotations

from typing import Any

from paperflow.core.registry import Registry

METHODS: Registry[type["Method"]] = Registry("unlearning method")


class Method:
    needs_ref = False  # whether a frozen reference model (the starting checkpoint) is used
    default_alpha = 1.0

    def __init__(self, params: dict[str, Any], ref_model=None) -> None:
        self.p = params
        self.ref = ref_model
        self.gamma = float(params.get("gamma", 1.0) if params.get("gamma") is not None else 1.0)
        a = params.get("alpha")
        self.alpha = float(self.default_alpha if a is None else a)

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
    _import_all()
    return METHODS[params["loss"]](params, ref_model)


def _import_all() -> None:
    from paperflow.unlearning.methods import grad_ascent, grad_diff, npo, rmu, simnpo  # noqa: F401
