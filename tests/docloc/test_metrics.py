"""ANLS from its definition against hand cases; box(ρ) and IoU."""

from __future__ import annotations

import numpy as np
import pytest

from paperflow.docloc.evaluate import anls, anls_one, box_of, iou, levenshtein, question_metrics


def test_levenshtein_hand_cases():
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert levenshtein("ABCDE", "ABCDE") == 0
    assert levenshtein("ABCDE", "ABXDE") == 1


def test_anls_hand_cases():
    assert anls_one("ABCDE", ["ABCDE"]) == 1.0
    assert anls_one(" abcde ", ["ABCDE"]) == 1.0  # case and whitespace
    assert anls_one("ABXDE", ["ABCDE"]) == pytest.approx(0.8)  # one edit of five
    assert anls_one("ABXYE", ["ABCDE"]) == pytest.approx(0.6)
    assert anls_one("AXYZE", ["ABCDE"]) == 0.0  # NL = 0.6 ≥ 0.5
    assert anls_one("ABXDE", ["QQQQQ", "ABCDE"]) == pytest.approx(0.8)  # best gold answer
    assert anls_one("", ["ABCDE"]) == 0.0
    assert anls(["ABCDE", "AXYZE"], [["ABCDE"], ["ABCDE"]]) == pytest.approx(0.5)


def test_box_of_takes_the_component_of_the_argmax():
    rho = np.zeros((8, 8))
    rho[1, 1:4] = 1.0
    rho[1, 3] = 2.0
    rho[6, 6] = 1.5  # above 0.5·max but another component
    assert box_of(rho) == (1 / 8, 1 / 8, 4 / 8, 2 / 8)


def test_iou():
    assert iou((0, 0, 1, 1), (0, 0, 1, 1)) == 1.0
    assert iou((0, 0, 0.5, 1), (0.5, 0, 1, 1)) == 0.0
    assert iou((0, 0, 1, 1), (0, 0, 0.5, 1)) == pytest.approx(0.5)


def test_question_metrics_reads_the_line_with_most_mass():
    rho = np.full((4, 4), 0.01)
    rho[2, 2:4] = 0.4
    ev = np.zeros((4, 4), np.uint8)
    ev[2, 2:4] = 1
    line_id = np.full((4, 4), -1)
    line_id[0, 0:2] = 0
    line_id[2, 2:4] = 1
    m = question_metrics([rho], ev, (0.5, 0.5, 1.0, 0.75), line_id, ["WRONG", "ABCDE"], ["ABCDE"])
    assert m["pred"] == "ABCDE" and m["em"] == 1.0 and m["acc50"] == 1.0 and m["mass"] == pytest.approx(0.8)
