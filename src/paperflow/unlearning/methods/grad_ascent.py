"""GradAscent [ou]: L_f = -CE(x, y); no retain term (alpha = 0 by definition)."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("grad_ascent")
class GradAscent(Method):
    defaults = {"gamma": 1.0}
    fixed = {"alpha": 0.0}

    def forget_loss(self, model, fb):
        from paperflow.unlearning.model import mean_ce

        return -mean_ce(model, fb)
