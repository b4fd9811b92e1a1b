"""Forward KL with the log-partition-estimate centre."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="forward_kl", centre="logz_estimate", description=__doc__)
