"""GradDiff [ou]: L_f = -CE(x, y), plus alpha * CE(x_r, y_r)."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("grad_diff")
class GradDiff(Method):
    def forget_loss(self, model, fb):
        from paperflow.unlearning.model import mean_ce

        return -mean_ce(model, fb)
