"""SimNPO [ou]: L_f = -(2/beta) log sigmoid(beta (-l_theta(y|x)/|y| - delta)); no reference model."""
from paperflow.unlearning.methods import METHODS, Method


@METHODS.register("simnpo")
class SimNPO(Method):
    def forget_loss(self, model, fb):
        import torch.nn.functional as F

        from paperflow.unlearning.model import token_logprobs

        beta = float(self.p.get("beta") or 4.5)
        delta = float(self.p.get("delta") or 0.0)
        lp, n = token_logprobs(model, fb)
        return (-F.logsigmoid(beta * (-lp / n - delta)) * 2.0 / beta).mean()
