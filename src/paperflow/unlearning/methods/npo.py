"""NPO [ou]: L_f = -(2/beta) log sigmoid(-beta [l_theta(y|x) - l_ref(y|x)]), l = summed answer log-prob,
ref = frozen starting checkpoint. Standard loss (no entropy term, unlike the Leak-k fork's trainer).
Defaults beta = 0.1, gamma = alpha = 1."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("npo")
class NPO(Method):
    needs_ref = True
    defaults = {"beta": 0.1, "gamma": 1.0, "alpha": 1.0}

    def validate(self) -> None:
        if float(self.hp["beta"]) <= 0:
            raise ValueError(f"npo: beta must be > 0 (the loss divides by it), got {self.hp['beta']}")

    def forget_loss(self, model, fb):
        import torch
        import torch.nn.functional as F

        from paperflow.unlearning.model import token_logprobs

        beta = float(self.hp["beta"])
        lp, _ = token_logprobs(model, fb)
        with torch.no_grad():
            lp_ref, _ = token_logprobs(self.ref, fb)
        return (-F.logsigmoid(-beta * (lp - lp_ref)) * 2.0 / beta).mean()
