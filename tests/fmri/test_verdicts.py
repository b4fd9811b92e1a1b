"""Claim logic of the fmri summary (claims.py) on synthetic metrics: held / did not hold / not testable
(and the other outcomes where a rule produces them) for every claim, thresholds from the schema defaults."""

from pathlib import Path

import numpy as np
import pytest

from paperflow.core.config import load_config
from paperflow.fmri import claims as C

HELD, NOT_HELD, NT, INC, PARTLY = C.HELD, C.NOT_HELD, C.NOT_TESTABLE, C.INCONCLUSIVE, C.PARTLY


@pytest.fixture(scope="module")
def cc():
    """The declared thresholds: schema defaults of `fmri.claims` (config/test.yaml sets none)."""
    return load_config(Path(__file__).resolve().parents[2] / "config" / "test.yaml")["fmri"]["claims"]


def _probe(mean, n=10, sd=0.02, seed=0):
    s = np.clip(mean + sd * np.random.default_rng(seed).standard_normal(n), 0, 1)
    return {"scores": s.tolist(), "mean": float(s.mean()), "std": float(s.std()), "n_splits": n}


def _met(state=None, traits=None, n_state=12, n_trait=36):
    state = state or {}
    traits = traits or {}
    return {"tasks": {"state6": state, "trait_group": traits.get("trait_group", {}),
                      "trait_age": traits.get("trait_age", {})},
            "chance": {"state6": 1 / 6, "trait_group": 0.5, "trait_age": 1 / 3},
            "n_state_subjects": n_state, "n_trait_subjects": n_trait, "n_state_clips": 6 * n_state}


def _state(flat=0.85, fc=0.25, parcel=0.8, volume=0.75, rand=0.6, n=10):
    return {"FC (parcel clip)": _probe(fc, n, seed=1), "MAE flat-s0": _probe(flat, n, seed=2),
            "MAE parcel-s0": _probe(parcel, n, seed=3), "MAE volume-s0": _probe(volume, n, seed=4),
            "MAE flat-rand": _probe(rand, n, seed=5)}


# ---- at chance ---------------------------------------------------------------------------------------

def test_verdict_at_chance_rule():
    assert C.at_chance([0.17, 0.18, 0.16], 1 / 6, 0.02)  # within the margin
    assert C.at_chance([0.10, 0.45, 0.20], 1 / 6, 0.02)  # mean 0.25 but the CI reaches chance
    assert not C.at_chance([0.24, 0.26, 0.25, 0.25], 1 / 6, 0.02)
    assert C.at_chance([0.05, 0.06], 1 / 6, 0.02)  # below chance is at chance too


# ---- projection and throughput ----------------------------------------------------------------------------

def test_verdict_projection(cc):
    ok = {"max_abs_diff_vs_nilearn": 1e-12, "value_range": 180.0, "D": 5044}
    assert C.projection(ok, cc["projection"]).verdict == HELD
    assert C.projection({**ok, "max_abs_diff_vs_nilearn": 1e-3}, cc["projection"]).verdict == NOT_HELD
    flat_field = C.projection({**ok, "value_range": 0.0}, cc["projection"])
    assert flat_field.verdict == NT and "degenerate" in flat_field.reason


def test_verdict_throughput(cc):
    assert C.throughput([5200.0, 7000.0, 6100.0], cc["throughput"]).verdict == HELD
    slow = C.throughput([5200.0, 400.0], cc["throughput"])  # the slowest job decides
    assert slow.verdict == NOT_HELD and "2 prep jobs" in slow.sample
    assert C.throughput([], cc["throughput"]).verdict == NT


# ---- state decoding --------------------------------------------------------------------------------

def test_verdict_state_vs_fc(cc):
    c = C.state_vs_fc(_met(_state(flat=0.85, fc=0.25)), cc["state_vs_fc"])
    assert c.verdict == HELD and "HCP task21 0.990" in c.paper and "1 pretraining seed × 10" in c.sample
    # better than FC, but not by the declared margin (0.1): did not hold
    assert C.state_vs_fc(_met(_state(flat=0.80, fc=0.75)), cc["state_vs_fc"]).verdict == NOT_HELD
    # FC at chance: nothing to beat
    at = C.state_vs_fc(_met(_state(flat=0.85, fc=0.17)), cc["state_vs_fc"])
    assert at.verdict == NT and "chance" in at.reason
    # too few subjects or splits
    assert C.state_vs_fc(_met(_state(), n_state=6), cc["state_vs_fc"]).verdict == NT
    assert C.state_vs_fc(_met(_state(n=2)), cc["state_vs_fc"]).verdict == NT
    # margin inside the CI
    noisy = _met({"FC (parcel clip)": {"scores": [0.3, 0.5, 0.3, 0.5]},
                  "MAE flat-s0": {"scores": [0.55, 0.5, 0.35, 0.6]}})
    assert C.state_vs_fc(noisy, cc["state_vs_fc"]).verdict == INC
    assert C.state_vs_fc(_met({"FC (parcel clip)": _probe(0.3)}), cc["state_vs_fc"]) is None


def test_verdict_state_vs_fc_averages_seeds_per_split(cc):
    st = _state(flat=0.85, fc=0.25)
    st["MAE flat-s1"] = _probe(0.95, seed=9)
    c = C.state_vs_fc(_met(st), cc["state_vs_fc"])
    assert c.verdict == HELD and "2 pretraining seeds" in c.sample


def test_verdict_space_order(cc):
    assert C.space_order(_met(_state(flat=0.9, parcel=0.7, volume=0.5)), cc["space_order"]).verdict == HELD
    assert C.space_order(_met(_state(flat=0.5, parcel=0.7, volume=0.9)), cc["space_order"]).verdict == NOT_HELD
    assert C.space_order(_met(_state(flat=0.85, parcel=0.59, volume=0.93)), cc["space_order"]).verdict == PARTLY
    assert C.space_order(_met(_state(parcel=0.17)), cc["space_order"]).verdict == NT  # a probe at chance
    assert C.space_order(_met(_state(), n_state=6), cc["space_order"]).verdict == NT


def test_verdict_pretraining_helps(cc):
    assert C.pretraining_helps(_met(_state(flat=0.85, rand=0.6)), cc["pretraining"]).verdict == HELD
    hurt = C.pretraining_helps(_met(_state(flat=0.85, rand=0.94)), cc["pretraining"])
    assert hurt.verdict == NOT_HELD and hurt.paper == "no number in the paper"
    ctl = C.pretraining_helps(_met(_state(flat=0.85, rand=0.16)), cc["pretraining"])
    assert ctl.verdict == NT and "random-init control at chance" in ctl.reason
    assert C.pretraining_helps(_met(_state(), n_state=4), cc["pretraining"]).verdict == NT


# ---- traits ------------------------------------------------------------------------------------------

def _traits(fc, flat, parcel=None, n=100):
    d = {"FC (parcel, whole run)": _probe(fc, n, sd=0.05, seed=1), "MAE flat-s0": _probe(flat, n, sd=0.05, seed=2),
         "oracle true R[1,2]": _probe(0.6, n, seed=3)}
    if parcel is not None:
        d["MAE parcel-s0"] = _probe(parcel, n, sd=0.05, seed=4)
    return d


def test_verdict_traits_fc_hard_to_beat(cc):
    held = C.trait_fc(_met(traits={"trait_group": _traits(0.65, 0.63, 0.64)}), "trait_group", cc["traits"])
    assert held.verdict == HELD and "ABIDE" in held.paper and "100 subject-level splits × 36 subjects" in held.sample
    # one MAE (the best one is taken) beats FC by far more than the declared 0.05
    beat = C.trait_fc(_met(traits={"trait_group": _traits(0.6, 0.62, 0.8)}), "trait_group", cc["traits"])
    assert beat.verdict == NOT_HELD and "parcel" in beat.reason
    # FC at chance (trait_group chance 0.5): nothing to beat
    at = C.trait_fc(_met(traits={"trait_group": _traits(0.49, 0.6)}), "trait_group", cc["traits"])
    assert at.verdict == NT and "chance" in at.reason
    assert C.trait_fc(_met(traits={"trait_age": _traits(0.5, 0.45)}, n_trait=9), "trait_age",
                      cc["traits"]).verdict == NT


# ---- scaling -----------------------------------------------------------------------------------------

def _fit(loss, init=1.0, frames=(720, 1440, 2880, 5760)):
    return {"sizes": list(range(1, len(loss) + 1)), "frames": list(frames)[:len(loss)], "loss": list(loss),
            "loss_init": [init] * len(loss)}


def test_verdict_scaling(cc):
    frames = np.array([720, 1440, 2880, 5760])
    law = (frames / 15.0) ** -0.02 * 0.95
    held = C.scaling(_fit(law * (1 + np.array([0.0005, -0.0005, 0.0004, -0.0003]))), cc["scaling"])
    assert held.verdict == HELD and "b = −0.014" in held.paper and "4 data sizes" in held.sample
    rising = C.scaling(_fit([0.90, 0.92, 0.94, 0.96]), cc["scaling"])
    assert rising.verdict == NOT_HELD
    # the flat, non-monotone curve of the tiny default (slope ≈ −4.5e-5): no longer "partly"
    flat = C.scaling(_fit([0.9850, 0.9768, 0.9825], frames=(1440, 2880, 7200)), cc["scaling"])
    assert flat.verdict == INC and "not monotone" in flat.reason
    # falls clearly but not monotonically: partly
    bumpy = C.scaling(_fit([0.95, 0.90, 0.905, 0.85, 0.80], frames=(1e3, 2e3, 4e3, 8e3, 16e3)), cc["scaling"])
    assert bumpy.verdict == PARTLY and "not monotone" in bumpy.reason
    # too few sizes, and runs that did not learn
    assert C.scaling(_fit([0.95, 0.94]), cc["scaling"]).verdict == NT
    idle = C.scaling(_fit([0.999, 0.998, 0.997], init=1.0), cc["scaling"])
    assert idle.verdict == NT and "barely trained" in idle.reason


def test_verdict_scaling_thresholds_come_from_the_config(cc):
    fit = _fit([0.95, 0.90, 0.905, 0.85, 0.80], frames=(1e3, 2e3, 4e3, 8e3, 16e3))
    assert C.scaling(fit, {**cc["scaling"], "min_n": 6}).verdict == NT
    assert C.scaling(_fit([0.999, 0.998, 0.997]), {**cc["scaling"], "min_rel_improvement": 0.0}).verdict != NT
