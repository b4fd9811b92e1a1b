"""RMU [ou]: steer layer-l hidden states of forget answer tokens to c*u (u a fixed random unit vector,
seeded), and keep retain hidden states at the reference model's:
L_f = mean_tokens ||h_l(x,y) - c u||^2 / d;  L_r = mean_tokens ||h_l(x_r) - h_l^ref(x_r)||^2 / d.
All parameters are updated (the original RMU updates three MLPs around layer l; noted in README).
Defaults (open-unlearning) layer 7, c = 2, gamma = alpha = 1 (the tiny config sets layer 2 of 4)."""
from paperflow.unlearning.methods import METHODS, Method


def _hidden(model, batch, layer):
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
    return out.hidden_states[layer + 1]  # output of decoder layer `layer`


@METHODS.register("rmu")
class RMU(Method):
    needs_ref = True
    defaults = {"layer": 7, "steering_coef": 2.0, "gamma": 1.0, "alpha": 1.0}

    def __init__(self, params, ref_model=None):
        super().__init__(params, ref_model)
        self._u = None

    def _control(self, d, device=None):
        """c * u, u drawn once on the CPU (seeded, the same vector on any device), then put on `device`."""
        import torch

        if self._u is None:
            g = torch.Generator().manual_seed(self.seed_u)
            u = torch.rand(d, generator=g)
            self._u = u / u.norm()
        if device is not None and self._u.device != torch.device(device):
            self._u = self._u.to(device)  # cached there: one copy, not one per step
        return float(self.hp["steering_coef"]) * self._u

    def forget_loss(self, model, fb):
        layer = int(self.hp["layer"])
        h = _hidden(model, fb, layer)
        mask = (fb["labels"] != -100).float()
        d = h.shape[-1]
        err = ((h - self._control(d, h.device)) ** 2).sum(-1) / d
        return (err * mask).sum() / mask.sum().clamp(min=1)

    def retain_loss(self, model, rb):
        import torch

        layer = int(self.hp["layer"])
        h = _hidden(model, rb, layer)
        with torch.no_grad():
            h_ref = _hidden(self.ref, rb, layer)
        mask = rb["attention_mask"].float()
        err = ((h - h_ref) ** 2).sum(-1) / h.shape[-1]
        return (err * mask).sum() / mask.sum().clamp(min=1)
