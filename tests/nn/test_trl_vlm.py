"""The VLM image path (paperflow.nn.trl_vlm): EasyR1-layout data, the boxed reward, TRL GRPO on a tiny LLaVA."""

from __future__ import annotations

import numpy as np
import pytest

from paperflow.nn import trl_vlm as V


def _images(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [rng.integers(0, 256, (20, 30, 3)).astype(np.uint8) for _ in range(n)]


def test_easyr1_roundtrip_keeps_problems_answers_and_pixels(tmp_path) -> None:
    rng = np.random.default_rng(0)
    ims = [_images(rng, 1), [], _images(rng, 2)]
    path = V.write_easyr1(tmp_path / "train.parquet", ["<image> how_many red ?", "2 + 3 ?", "<image> and <image> ?"],
                          [3, "5", 1], ims)
    rows = V.read_easyr1(path, format_prompt="put it in \\boxed{ }")
    assert rows["answer"] == ["3", "5", "1"]
    assert [len(x) for x in rows["images"]] == [1, 0, 2]
    np.testing.assert_array_equal(np.asarray(rows["images"][2][1]), ims[2][1])  # PNG: lossless
    parts = rows["prompt"][2][0]["content"]
    assert [p["type"] for p in parts] == ["image", "text", "image", "text"]
    assert parts[-1]["text"] == "? put it in \\boxed{ }"
    assert rows["prompt"][1][0]["content"] == [{"type": "text", "text": "2 + 3 ? put it in \\boxed{ }"}]


def test_read_easyr1_names_file_and_row_of_a_placeholder_mismatch(tmp_path) -> None:
    from datasets import Dataset, Features, Image, List, Value
    from PIL import Image as PILImage

    img = PILImage.fromarray(np.zeros((4, 4, 3), np.uint8))
    feats = Features({"problem": Value("string"), "answer": Value("string"), "images": List(Image())})
    path = tmp_path / "bad.parquet"
    Dataset.from_dict({"problem": ["<image> ok", "no placeholder"], "answer": ["1", "2"], "images": [[img], [img]]},
                      features=feats).to_parquet(str(path))
    with pytest.raises(V.EasyR1FormatError, match=r"bad\.parquet: row 1: 0 <image> placeholders but 1 images"):
        V.read_easyr1(path)
    with pytest.raises(V.EasyR1FormatError, match="no column 'question'"):
        V.read_easyr1(path, prompt_key="question")
    with pytest.raises(ValueError, match="row 0"):
        V.write_easyr1(tmp_path / "w.parquet", ["no image"], ["1"], [[np.zeros((4, 4, 3), np.uint8)]])


def test_boxed_reward_follows_easyr1_math_score() -> None:
    reward = V.make_boxed_reward(0.1)
    good = "<think> 2 + 1 </think> so \\boxed{ 3 }"
    assert reward([good], ["3"]) == [pytest.approx(1.0)]
    assert reward(["\\boxed{3}"], ["3"]) == [pytest.approx(0.9)]  # right answer, no <think>: format 0
    assert reward(["<think> x </think> \\boxed{4}"], ["3"]) == [pytest.approx(0.1)]  # format only
    assert reward(["3"], ["3"]) == [0.0]  # no box, no credit
    assert reward([[{"role": "assistant", "content": "\\boxed{3.0}"}]], ["3"]) == [pytest.approx(0.9)]
    assert V.extract_boxed("\\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert V.extract_boxed("\\boxed{unclosed") is None


def test_tiny_llava_processor_expands_image_tokens_and_sees_the_pixels() -> None:
    import torch

    proc = V.word_processor(["how_many", "red", "?", "1", "2", "3"])
    model = V.tiny_llava(proc, seed=0)
    rng = np.random.default_rng(1)
    from PIL import Image as PILImage

    def logits(arr: np.ndarray) -> torch.Tensor:
        msgs = [{"role": "user", "content": [{"type": "image", "image": PILImage.fromarray(arr)},
                                             {"type": "text", "text": "how_many red ?"}]}]
        b = proc.apply_chat_template([msgs], add_generation_prompt=True, tokenize=True, return_dict=True,
                                     return_tensors="pt")
        img_id = proc.tokenizer.convert_tokens_to_ids("<image>")
        assert int((b["input_ids"] == img_id).sum()) == 4  # (28 / 14)² patch tokens
        with torch.no_grad():
            return model(**b).logits[0, -1]

    a, b = _images(rng, 2)
    assert not torch.allclose(logits(a), logits(b))  # the answer depends on the image
    torch.testing.assert_close(logits(a), logits(a))


def test_trl_grpo_trains_the_vision_tower_of_a_tiny_llava_on_easyr1_data(tmp_path) -> None:
    import torch

    from paperflow.nn import trl_grpo

    rng = np.random.default_rng(2)
    n = 8
    path = V.write_easyr1(tmp_path / "vis.parquet", ["<image> how_many red ?"] * n,
                          [str(i % 3 + 1) for i in range(n)], [_images(rng, 1) for _ in range(n)])
    rows = V.read_easyr1(path, format_prompt="\\boxed{ }")
    proc = V.word_processor(["how_many", "red", "?", "+", "1", "2", "3"])
    model = V.tiny_llava(proc, seed=0)
    before = {k: v.detach().clone() for k, v in model.named_parameters() if "vision_tower" in k}

    def spread(completions, **_):  # a reward with variance (a random model's boxed accuracy is ~0)
        return [float(len(set(V.completion_text(c).split()))) for c in completions]

    s = trl_grpo.GRPOSettings(num_generations=4, prompts_per_step=2, max_completion_length=4, max_steps=2,
                              learning_rate=1e-2)
    log = trl_grpo.train(model, proc, rows, [spread, V.make_boxed_reward()], s, tmp_path / "out")
    assert len(log) == 2 and all(np.isfinite(h["loss"]) for h in log)
    moved = [k for k, v in model.named_parameters() if k in before and not torch.equal(v, before[k])]
    assert moved, "no vision-tower weight changed: the pixels did not reach the policy-gradient loss"


def test_modality_blocks_make_every_batch_one_modality_and_trl_trains_on_them(tmp_path) -> None:
    from paperflow.nn import trl_grpo

    rng = np.random.default_rng(3)
    n_img, n_txt = 7, 5
    problems = ["<image> how_many red ?"] * n_img + ["1 + 2 ?"] * n_txt
    path = V.write_easyr1(tmp_path / "merged.parquet", problems, ["3"] * (n_img + n_txt),
                          [_images(rng, 1) for _ in range(n_img)] + [[] for _ in range(n_txt)])
    rows = V.read_easyr1(path)
    out = V.modality_blocks(rows, 2, np.random.default_rng(0))
    kinds = [bool(x) for x in out["images"]]
    assert len(kinds) == 6 + 4  # 7 image rows → 3 blocks of 2; 5 text rows → 2 blocks
    assert all(kinds[k] == kinds[k + 1] for k in range(0, len(kinds), 2))
    assert V.modality_blocks(rows, 2, np.random.default_rng(0)) == out  # seeded
    proc = V.word_processor(["how_many", "red", "?", "+", "1", "2", "3"])
    model = V.tiny_llava(proc, seed=0)
    s = trl_grpo.GRPOSettings(num_generations=2, prompts_per_step=2, max_completion_length=3, max_steps=4,
                              learning_rate=1e-3, shuffle=False)
    log = trl_grpo.train(model, proc, out, [V.make_boxed_reward()], s, tmp_path / "out")
    assert len(log) == 4
