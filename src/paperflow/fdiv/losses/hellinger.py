"""f-TB alpha_linex=0.5 (squared Hellinger)."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="hellinger", centre="profiled", description=__doc__)
