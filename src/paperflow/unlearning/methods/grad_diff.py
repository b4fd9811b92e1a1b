"""GradDiff [ou]: L_f = -CE(x, y), plus alpha * CE(x_r, y_r). Defaults gamma = alpha = 1."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("grad_diff")
class GradDiff(Method):
    defaults = {"gamma": 1.0, "alpha": 1.0}

    def forget_loss(self, model, fb):
        from paperflow.unlearning.model import mean_ce

        return -mean_ce(model, fb)
