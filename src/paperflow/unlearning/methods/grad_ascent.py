"""GradAscent [ou]: L_f = -CE(x, y); no retain term (alpha = 0)."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("grad_ascent")
class GradAscent(Method):
    default_alpha = 0.0

    def __init__(self, params, ref_model=None):
        super().__init__(params, ref_model)
        self.alpha = 0.0  # by definition: no retain term

    def forget_loss(self, model, fb):
        from paperflow.unlearning.model import mean_ce

        return -mean_ce(model, fb)
