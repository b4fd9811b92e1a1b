"""f-TB alpha_linex=1 (forward KL)."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="forward_kl", centre="profiled", description=__doc__)
