"""NPO [ou]: L_f = -(2/beta) log sigmoid(-beta [l_theta(y|x) - l_ref(y|x)]), l = summed answer log-prob,
ref = frozen starting checkpoint. Standard loss (no entropy term, unlike the Leak-k fork's trainer)."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("npo")
class NPO(Method):
    needs_ref = True

    def forget_loss(self, model, fb):
        import torch
        import torch.nn.functional as F

        from paperflow.unlearning.model import token_logprobs

        beta = float(self.p.get("beta") or 0.1)
        lp, _ = token_logprobs(model, fb)
        with torch.no_grad():
            lp_ref, _ = token_logprobs(self.ref, fb)
        return (-F.logsigmoid(-beta * (lp - lp_ref)) * 2.0 / beta).mean()
