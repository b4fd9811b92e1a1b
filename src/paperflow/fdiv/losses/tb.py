"""Trajectory balance: g = s^2/2 with a learned log Z."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="reverse_kl", centre="learned", description=__doc__)
