"""f-TB Jensen-Shannon, centre = batch log-partition estimate."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="js", centre="logz_estimate", description=__doc__)
