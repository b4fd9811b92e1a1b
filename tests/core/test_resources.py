from __future__ import annotations

import pytest

from paperflow.core.resources import per_job


def test_per_job_keeps_order_and_every_item() -> None:
    assert per_job(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert per_job(range(3), 5) == [[0, 1, 2]]
    assert per_job([], 3) == []
    with pytest.raises(ValueError, match=">= 1"):
        per_job([1, 2], 0)
