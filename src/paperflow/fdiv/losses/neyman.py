"""f-TB alpha_linex=-1 (Neyman chi^2)."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="neyman_chi2", centre="profiled", description=__doc__)
