"""f-TB alpha_linex=2 (Pearson chi^2)."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="pearson_chi2", centre="profiled", description=__doc__)
