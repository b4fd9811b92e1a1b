"""SimNPO [ou]: L_f = -(2/beta) log sigmoid(beta (-l_theta(y|x)/|y| - delta)); no reference model.
Defaults beta = 4.5, delta = 0, gamma = 0.125, alpha = 1."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("simnpo")
class SimNPO(Method):
    defaults = {"beta": 4.5, "delta": 0.0, "gamma": 0.125, "alpha": 1.0}

    def validate(self) -> None:
        if float(self.hp["beta"]) <= 0:
            raise ValueError(f"simnpo: beta must be > 0 (the loss divides by it), got {self.hp['beta']}")

    def forget_loss(self, model, fb):
        import torch.nn.functional as F

        from paperflow.unlearning.model import token_logprobs

        beta, delta = float(self.hp["beta"]), float(self.hp["delta"])
        lp, n = token_logprobs(model, fb)
        return (-F.logsigmoid(beta * (-lp / n - delta)) * 2.0 / beta).mean()
