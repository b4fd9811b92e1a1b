"""f-TB alpha_linex=0: half the batch variance of r (log-variance / VarGrad)."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="reverse_kl", centre="profiled", description=__doc__)
