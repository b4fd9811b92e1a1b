"""JS with the profiled centre argmin_c mean g(r - c) (bisection): same minimiser, but on-policy it
follows f_kappa(u) = f(kappa u)/kappa, not JS (spec §4.2)."""

from paperflow.fdiv.losses import define

LOSS = define(__name__, divergence="js", centre="profiled_numeric", description=__doc__)
