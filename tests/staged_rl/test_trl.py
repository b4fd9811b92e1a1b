"""rl.backend = trl: the same arm/stage/data/reward mapped onto TRL's GRPOTrainer, 2 steps on a tiny Llama."""

from __future__ import annotations

import pytest

from paperflow.staged_rl.data import load_split, load_world
from paperflow.staged_rl.trl_backend import TRL_VOCAB, make_reward, parse_words, rows_of

from .conftest import small_params


def test_reward_and_parse_match_the_grammar():
    assert parse_words("<look> <see> 2 1 </see> <ans> 3 <eos>") == (3, 1)
    assert parse_words("<ans> 7") == (7, 0)
    assert parse_words("<see> 2 </see> <ans>") == (None, 0)
    r = make_reward(0.05)(["<look> <ans> 3", "<ans> 4", "garbage"], answer=[3, 3, 3])
    assert r == pytest.approx([0.95, 0.0, 0.0])


def test_rows_use_visual_words_for_the_image(world):
    protos = load_world(world)["protos"]
    rows = rows_of(load_split(world, "test_vis"), protos)
    words = rows["prompt"][0].split()
    assert all(w.startswith("v_") for w in words[:6]) and words[-1] == "?"
    assert all(w in TRL_VOCAB for r in rows["prompt"] for w in r.split())


@pytest.mark.filterwarnings("ignore")
def test_two_trl_grpo_steps_on_tiny_llama(world):
    pytest.importorskip("trl")
    from paperflow.staged_rl.trl_backend import run_arm_trl

    p = small_params(backend="trl", split=[0, 0, 2], group_size=2, prompts_per_update=2,
                     trl={"model_path": None, "hidden": 16, "layers": 1, "learning_rate": 1e-4,
                          "max_completion_length": 6, "steps_scale": 1.0, "n_test": 3})
    r = run_arm_trl("v_only", world, {"keep": [0, 1, 2]}, p, 0)
    (st,) = r["stages"]
    assert st["stage"] == "vis" and st["updates"] == 2 and len(st["history"]) == 2
    assert all("reward" in h for h in st["history"])
    assert set(st["eval"]) == {"perc", "text", "vis"} and len(st["eval"]["vis"]["correct"]) == 3
    assert st["seconds_per_step"] > 0
