"""Judges and unlearning losses."""
import math
from pathlib import Path

import pytest
import torch

from paperflow.unlearning.judge import has_fact, make_judge, rougeL_recall
from paperflow.unlearning.methods import METHODS, build_method
from paperflow.unlearning.model import collate, encode_pair, mean_ce
from paperflow.unlearning.train import frozen_copy

REPO = Path(__file__).resolve().parents[2]
ROW = {"answer": "The author was born in Kalotor .", "key_facts": ["Kalotor"]}


def test_rouge_recall_and_keyfact_judge():
    assert rougeL_recall("The author was born in Kalotor .", ROW["answer"]) == pytest.approx(1.0)
    assert rougeL_recall("", ROW["answer"]) == 0.0
    kf = make_judge("keyfact", gate=0.1)
    assert kf("The author was born in Kalotor", ROW)[0] == 1
    assert kf("born in Kalotorx", ROW)[0] == 0  # token-boundary match
    assert kf("Kalotor", ROW)[0] == 1  # gate: recall 1/6 >= 0.1
    assert kf("The author was born in Misha .", ROW)[0] == 0
    assert make_judge("keyfact", gate=0.9)("Kalotor", ROW)[0] == 0  # gate blocks
    assert has_fact("THE PRIZE: Kalo-Tor!", "kalo tor")
    rj = make_judge("rouge", gate=0.1, threshold=0.5)
    assert rj("The author was born in", ROW)[0] == 1 and rj("born", ROW)[0] == 0
    with pytest.raises(KeyError):
        kf("x", {"answer": "y"})
    with pytest.raises(ValueError):
        make_judge("nli", nli_model=None)


def test_memoized_rouge_equals_rouge_scores_own_tokenizer():
    """The judge's memoized tokenizer/stemmer gives rouge-score's own numbers, repeats included."""
    from rouge_score import rouge_scorer

    from paperflow.unlearning.judge import _scorer

    plain = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    golds = ["The author was born in Kalotor .", "Her novels, 'Running Waters' (1998), won prizes!",
             "Generously studied; relational databases — running, runs, ran."]
    resps = ["", "   ", "the AUTHOR was born", "novels won running prizes prizes", "Kalotor Kalotor 1998",
             "generous studies relate to running runners", "ran runs running run", "é ü ß 42", golds[1]]
    for _ in range(2):  # the second pass reads the memo
        for g in golds:
            for r in resps:
                want = plain.score(g, r)["rougeL"]
                got = _scorer().score(g, r)["rougeL"]
                assert got == want
                if r.strip():
                    assert rougeL_recall(r, g) == want.recall


def test_registry_is_discovered_from_the_method_modules():
    from paperflow.core.config import load_config
    from paperflow.unlearning.methods import import_all, module_names

    import_all()
    assert set(METHODS.names()) == set(module_names()) >= {"grad_ascent", "grad_diff", "npo", "simnpo", "rmu"}
    # the schema's enum of `loss` is the same list (x-enum-modules), so a typo fails validation
    from paperflow.core.config import ConfigError

    with pytest.raises(ConfigError):
        load_config(REPO / "config" / "test.yaml", {"unlearning.methods.npo.loss": "npoo"})


def test_class_defaults_apply_only_when_unset_and_a_configured_zero_stays_zero():
    assert build_method({"loss": "npo"}).hp == {"beta": 0.1, "gamma": 1.0, "alpha": 1.0}
    assert build_method({"loss": "simnpo", "beta": None}).hp == {"beta": 4.5, "delta": 0.0, "gamma": 0.125, "alpha": 1.0}
    zeros = {"grad_diff": ("gamma", "alpha"), "npo": ("gamma", "alpha"), "simnpo": ("delta", "gamma", "alpha"),
             "rmu": ("layer", "steering_coef", "gamma", "alpha"), "grad_ascent": ("gamma", "alpha")}
    nonzero_default = 0
    for loss, keys in zeros.items():
        for k in keys:
            m = build_method({"loss": loss, k: 0, "lr": 0.0, "max_steps": 0, "seed_u": 0})
            assert m.hp[k] == 0, (loss, k)
            nonzero_default += bool(build_method({"loss": loss}).hp[k])
            if k == "alpha":
                assert m.alpha == 0.0
            if k == "gamma":
                assert m.gamma == 0.0
    assert nonzero_default >= 8  # the zeros above replaced non-zero defaults: a `x or default` would fail
    for loss in ("npo", "simnpo"):  # beta = 0 is undefined (the loss divides by it): refused, not replaced
        with pytest.raises(ValueError, match="beta"):
            build_method({"loss": loss, "beta": 0})
    with pytest.raises(ValueError, match="takes no 'beta'"):
        build_method({"loss": "grad_diff", "beta": 0.5})
    with pytest.raises(ValueError, match="fixed"):
        build_method({"loss": "grad_ascent", "alpha": 3.0})


def _batches(tok, rows):
    f = collate([encode_pair(tok, r["question"], r["answer"]) for r in rows[:4]], tok.pad_token_id)
    r = collate([encode_pair(tok, r["question"], r["answer"]) for r in rows[8:12]], tok.pad_token_id)
    return f, r


def test_loss_values_at_reference(tiny_lm):
    tok, model, rows, _ = tiny_lm
    fb, rb = _batches(tok, rows)
    ref = frozen_copy(model)
    beta = 0.7
    npo = build_method({"loss": "npo", "beta": beta, "alpha": 0.0}, ref)
    lf = npo.forget_loss(model, fb)
    assert float(lf) == pytest.approx(2 / beta * math.log(2), rel=1e-5)  # theta = ref
    ga = build_method({"loss": "grad_ascent", "alpha": 0.0})
    assert ga.alpha == 0.0
    assert float(ga.forget_loss(model, fb)) == pytest.approx(-float(mean_ce(model, fb)))
    gd = build_method({"loss": "grad_diff", "alpha": 2.0})
    total, logs = gd.loss(model, fb, rb)
    assert float(total) == pytest.approx(logs["L_f"] + 2.0 * logs["L_r"], rel=1e-5)
    rmu = build_method({"loss": "rmu", "layer": 1, "steering_coef": 2.0}, ref)
    assert float(rmu.retain_loss(model, rb)) == pytest.approx(0.0, abs=1e-10)
    assert float(rmu.forget_loss(model, fb)) > 0


def test_one_step_of_each_method_lowers_its_forget_loss(tiny_lm):
    tok, model0, rows, _ = tiny_lm
    fb, rb = _batches(tok, rows)
    for params in ({"loss": "grad_ascent"}, {"loss": "grad_diff", "alpha": 1.0}, {"loss": "npo", "beta": 1.0},
                   {"loss": "simnpo", "beta": 0.1, "delta": 0.0}, {"loss": "rmu", "layer": 1, "steering_coef": 2.0}):
        model = frozen_copy(model0)
        for q in model.parameters():
            q.requires_grad_(True)
        m = build_method({**params, "alpha": 0.0} if params["loss"] != "grad_ascent" else params, frozen_copy(model0))
        m.alpha = 0.0
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        before = float(m.forget_loss(model, fb))
        loss, _ = m.loss(model, fb, rb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        after = float(m.forget_loss(model, fb))
        assert after < before, params
        if params["loss"] in ("grad_ascent", "grad_diff", "npo", "simnpo"):
            assert float(mean_ce(model, fb)) > float(mean_ce(model0, fb))  # forget CE goes up


def test_plan_refuses_a_hyperparameter_the_method_does_not_take():
    from paperflow.core.config import load_config
    from paperflow.unlearning import plan

    cfg = load_config(REPO / "config" / "test.yaml", {"unlearning.methods.npo.delta": 0.5})["unlearning"]
    with pytest.raises(ValueError, match=r"unlearning\.methods\.npo.*takes no 'delta'"):
        plan.unlearn_params(cfg, "npo", 0)
    ok = load_config(REPO / "config" / "test.yaml", {"unlearning.methods.npo.alpha": 0})["unlearning"]
    assert plan.unlearn_params(ok, "npo", 0)["method_params"]["alpha"] == 0
