"""Linex(1) with a learned log Z (Hu et al. 2025)."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="forward_kl", centre="learned", description=__doc__)
