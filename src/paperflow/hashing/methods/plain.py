"""`plain` [R]: supervised hashing with no noise handling (spec §4); `plain` at r = 0 is the clean oracle."""

from __future__ import annotations

from paperflow.hashing.methods import Method, register
from paperflow.hashing.methods._common import SUPERVISED_KEYS, supervised

METHOD = register(Method("plain", loss=lambda b: supervised(b), config_keys=dict(SUPERVISED_KEYS), role="baseline",
                         order=0))
