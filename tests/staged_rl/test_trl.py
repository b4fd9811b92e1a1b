"""rl.backend = trl: the same arm/stage/data/reward mapped onto TRL's GRPOTrainer, 2 steps on a tiny Llama."""

from __future__ import annotations

import numpy as np
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


def test_slot_image_renders_each_slots_features_as_grey_blocks(world):
    from paperflow.staged_rl.trl_backend import VLM_BLOCK, slot_image, vlm_items

    d = load_split(world, "test_vis")
    feats = d["feats"][0]
    img = slot_image(feats)
    assert img.dtype.name == "uint8" and img.shape[0] == img.shape[1] and img.shape[2] == 3
    n_slots, dim = feats.shape
    centre = img[VLM_BLOCK // 2::VLM_BLOCK, VLM_BLOCK // 2::VLM_BLOCK, 0][:dim, :n_slots].T  # one pixel per block
    decoded = (centre.astype(float) - 128) / 40
    inside = (centre > 0) & (centre < 255)
    assert inside.mean() > 0.9
    assert abs(decoded - feats)[inside].max() <= 0.5 / 40 + 1e-6  # the percept, up to uint8 rounding
    problems, answers, images = vlm_items(d)
    assert problems[0].startswith("<image> ") and len(images[0]) == 1 and answers[0] == str(int(d["answer"][0]))
    t_problems, _, t_images = vlm_items(load_split(world, "test_text"))
    assert "<image>" not in t_problems[0] and t_images[0] == []


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("arm", ["v_only", "merged"])
def test_two_trl_grpo_steps_on_a_tiny_vlm_through_easyr1_files(world, arm):
    pytest.importorskip("trl")
    from paperflow.staged_rl.trl_backend import run_arm_trl

    # v_only with EasyR1's KL (TRL's reference model is loaded from the stage's saved initial weights)
    p = small_params(backend="trl", split=[1, 1, 2], group_size=2, prompts_per_update=2,
                     kl_beta=0.01 if arm == "v_only" else 0.0,
                     trl={"model_path": None, "hidden": 16, "layers": 1, "learning_rate": 1e-4, "vlm": True,
                          "data_files": {}, "format_prompt": None, "format_weight": 0.1,
                          "max_completion_length": 4, "steps_scale": 0.5, "n_test": 2})
    r = run_arm_trl(arm, world, {"keep": [0, 1, 2, 3]}, p, 0)
    assert r["model"] == "vlm"
    (st,) = r["stages"]
    if arm == "merged":  # the perc and vis items carry the scene image, the text sums none: both in one stage
        assert 0 < st["n_image_items"] < st["n_items"]
    else:
        assert st["n_image_items"] == st["n_items"] > 0
        assert all(np.isfinite(h["kl"]) for h in st["history"])  # the KL term ran against the reference
    assert st["updates"] == 2 and len(st["history"]) == 2 and all("reward" in h for h in st["history"])
    assert set(st["eval"]) == {"perc", "text", "vis"} and len(st["eval"]["vis"]["correct"]) == 2


def test_released_easyr1_files_replace_the_generated_stage_data(world, tmp_path):
    from paperflow.nn.trl_vlm import write_easyr1
    from paperflow.staged_rl.trl_backend import vlm_stage_rows

    rng = np.random.default_rng(0)
    img = [rng.integers(0, 256, (8, 8, 3)).astype(np.uint8)]
    files = {"perc": write_easyr1(tmp_path / "p.parquet", ["<image> what colour ?"] * 3, ["a", "b", "c"], [img] * 3),
             "text": write_easyr1(tmp_path / "t.parquet", ["1 + 1 ?"] * 2, ["2", "2"], [[], []]),
             "vis": write_easyr1(tmp_path / "v.parquet", ["<image> sum ?"] * 4, ["9"] * 4, [img] * 4)}
    p = small_params(backend="trl", split=[1, 1, 2], prompts_per_update=1,
                     trl={"vlm": True, "data_files": {k: str(v) for k, v in files.items()}, "format_prompt": "box it"})
    vis = vlm_stage_rows("vis", world, {"keep": [0]}, p, 0, tmp_path)
    assert vis["answer"] == ["9"] * 4 and vis["prompt"][0][0]["content"][-1]["text"] == "sum ? box it"
    merged = vlm_stage_rows("merged", world, {"keep": [0]}, p, 0, tmp_path)
    assert len(merged["prompt"]) == 9 and set(merged["answer"]) <= {"a", "b", "c", "2", "9"}
    with pytest.raises(ValueError, match="no 'perc_unf' file"):
        vlm_stage_rows("perc_unf", world, {"keep": [0]}, p, 0, tmp_path)


def _trace(r):
    return [(st["stage"], [(h["step"], h["reward"], h["loss"]) for h in st["history"]], st["eval"]) for st in r["stages"]]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("vlm", [False, True])
def test_a_killed_trl_arm_resumes_to_the_uninterrupted_result(world, tmp_path, vlm):
    """p_t_v = 3 stages of 2 TRL steps; killed after 3 steps (stage P done, stage T at step 1 of 2, TRL checkpoint
    at step 1), rerun from the same folder: the same histories and evaluations as one uninterrupted run."""
    from paperflow.staged_rl.trl_backend import run_arm_trl

    p = small_params(backend="trl", split=[2, 2, 2], group_size=2, prompts_per_update=2, kl_beta=0.01,
                     trl={"model_path": None, "hidden": 16, "layers": 1, "learning_rate": 1e-3, "vlm": vlm,
                          "save_steps": 1, "data_files": {}, "format_prompt": None, "format_weight": 0.1,
                          "max_completion_length": 4, "steps_scale": 1.0, "n_test": 2})
    filt = {"keep": [0, 1, 2, 3]}
    full = run_arm_trl("p_t_v", world, filt, p, 0, ckpt=tmp_path / "a")
    assert run_arm_trl("p_t_v", world, filt, p, 0, ckpt=tmp_path / "b", stop_after=3) is None
    assert (tmp_path / "b" / "0_perc" / "done.json").exists() and (tmp_path / "b" / "1_text" / "trl").is_dir()
    resumed = run_arm_trl("p_t_v", world, filt, p, 0, ckpt=tmp_path / "b")
    assert _trace(resumed) == _trace(full)
    kept = sorted(str(x.relative_to(tmp_path / "b")) for x in (tmp_path / "b").glob("*/model"))
    assert kept == ["2_vis/model"]  # only the newest stage weights stay on disk
    assert [st["stage"] for st in full["stages"]] == ["perc", "text", "vis"]


def test_the_text_stage_freezes_the_vision_encoder_and_unfreezes_it_after():
    from paperflow.nn import trl_vlm
    from paperflow.staged_rl.trl_backend import TRL_VOCAB, set_vision_frozen

    proc = trl_vlm.word_processor(TRL_VOCAB)
    model = trl_vlm.tiny_llava(proc, hidden=16, layers=1)
    n = set_vision_frozen(model, True)
    tower = [q for name, q in model.named_parameters() if "vision_tower" in name]
    assert n == len(tower) > 0 and not any(q.requires_grad for q in tower)
    assert all(q.requires_grad for name, q in model.named_parameters() if "vision_tower" not in name)
    assert set_vision_frozen(model, False) == 0 and all(q.requires_grad for q in tower)
    from paperflow.nn.trl_grpo import tiny_llama

    assert set_vision_frozen(tiny_llama(8), True) == 0  # a text LM has no encoder


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("vlm", [False, True])
def test_an_empty_filtered_perception_set_skips_its_stage_as_grpo_lite_does(world, vlm):
    from paperflow.staged_rl.trl_backend import run_arm_trl

    p = small_params(backend="trl", split=[1, 1, 1], group_size=2, prompts_per_update=2, kl_beta=0.0,
                     trl={"model_path": None, "hidden": 16, "layers": 1, "learning_rate": 1e-3, "vlm": vlm,
                          "data_files": {}, "format_prompt": None, "format_weight": 0.1,
                          "max_completion_length": 4, "steps_scale": 1.0, "n_test": 2})
    r = run_arm_trl("p_t_v", world, {"keep": []}, p, 0)
    perc, text, vis = r["stages"]
    assert perc["updates"] == 0 and "skipped" in perc and text["updates"] == vis["updates"] == 1


def test_parse_int_answer_reads_the_box_or_the_first_number():
    from paperflow.staged_rl.trl_backend import parse_int_answer

    assert parse_int_answer("<think> 2 </think> \\boxed{ 3 }") == 3
    assert parse_int_answer("it is 4.") == 4 and parse_int_answer("red") is None
    assert parse_int_answer("\\boxed{ red }") is None


class _Scripted:
    """A stand-in filter model: answers from a table keyed by (prompt text) — exercises the keep rule exactly."""

    def __init__(self, answer_of):
        self.answer_of = answer_of


def test_vlm_filter_keeps_items_every_model_gets_wrong_from_the_image_and_right_from_the_caption(world, monkeypatch):
    from paperflow.nn import trl_vlm
    from paperflow.staged_rl import trl_backend as TB

    pool = {k: v[:6] for k, v in load_split(world, "perc_pool").items()}
    gold = [int(a) for a in pool["answer"]]
    # model A: image wrong on items 0-3, unparseable on 4, right on 5; caption right on all but 2
    # model B: image wrong on 1-5, right on 0; caption right everywhere
    plan = {"A": ({0: "w", 1: "w", 2: "w", 3: "w", 4: "", 5: "r"}, {0: "r", 1: "r", 2: "w", 3: "r", 4: "r", 5: "r"}),
            "B": ({0: "r", 1: "w", 2: "w", 3: "w", 4: "w", 5: "w"}, {i: "r" for i in range(6)})}

    def fake_generate(model, proc, rows, max_new_tokens):
        img = any(rows["images"])
        table = plan[model.answer_of][0 if img else 1]
        out = []
        for i in range(len(rows["prompt"])):
            a = table[i]
            out.append("" if a == "" else str(gold[i] if a == "r" else gold[i] + 1))
        return out

    monkeypatch.setattr(trl_vlm, "generate_answers", fake_generate)
    r = TB.vlm_perception_filter([(_Scripted("A"), None), (_Scripted("B"), None)], pool)
    assert r["keep"] == [1, 3] and r["n_pool"] == 6  # 0: B right from image; 2: A wrong from caption; 4: A blank
    assert [m["kept"] for m in r["per_model"]] == [3, 5] and r["per_model"][0]["img_unparseable"] == 1 / 6


@pytest.mark.filterwarnings("ignore")
def test_the_arms_stage_runs_the_vlm_filter_with_the_tiny_llava(world, tmp_path):
    import json

    from paperflow.staged_rl import stages

    p = small_params(backend="trl", split=[1, 1, 1], group_size=2, prompts_per_update=2, kl_beta=0.0, arms=["p_t_v"],
                     trl={"model_path": None, "hidden": 16, "layers": 1, "learning_rate": 1e-3, "vlm": True,
                          "filter_models": ["tiny"], "data_files": {}, "format_prompt": None, "format_weight": 0.1,
                          "max_completion_length": 4, "steps_scale": 1.0, "n_test": 2, "save_steps": 0})
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"filter": {"keep": [0, 1, 2]}, "eval": {}}))
    (tmp_path / "unused.safetensors").write_bytes(b"")  # the trl path never reads the base policy's weights
    out = tmp_path / "arms.json"
    stages.arms(p, data=world, weights=tmp_path / "unused.safetensors", base=base, out=out, ckpt=tmp_path / "ckpt")
    r = json.loads(out.read_text())
    assert r["vlm_filter"]["n_pool"] == len(load_split(world, "perc_pool")["task"])
    assert r["n_filtered"] == len(r["vlm_filter"]["keep"])


@pytest.mark.filterwarnings("ignore")
def test_a_resume_after_a_skipped_stage_evaluates_the_right_weights(world, tmp_path):
    """t_p_v with an empty D_perc: text trains, perc is skipped (evaluated on the text-stage weights), vis trains.
    Killed inside vis and rerun: the skipped stage's record is replayed, not re-evaluated on other weights."""
    from paperflow.staged_rl.trl_backend import run_arm_trl

    p = small_params(backend="trl", split=[2, 2, 2], group_size=2, prompts_per_update=2, kl_beta=0.0,
                     trl={"model_path": None, "hidden": 16, "layers": 1, "learning_rate": 1e-2, "vlm": False,
                          "save_steps": 1, "max_completion_length": 4, "steps_scale": 1.0, "n_test": 3})
    full = run_arm_trl("t_p_v", world, {"keep": []}, p, 0, ckpt=tmp_path / "a")
    assert run_arm_trl("t_p_v", world, {"keep": []}, p, 0, ckpt=tmp_path / "b", stop_after=3) is None
    assert (tmp_path / "b" / "1_perc" / "done.json").exists()
    resumed = run_arm_trl("t_p_v", world, {"keep": []}, p, 0, ckpt=tmp_path / "b")
    assert [st["stage"] for st in resumed["stages"]] == ["text", "perc", "vis"] and "skipped" in resumed["stages"][1]
    assert _trace(resumed) == _trace(full)
