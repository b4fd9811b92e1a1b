"""model.kind vlm: self-captions + LoRA SFT through TRL/peft on a tiny LLaVA (mi_gate/vlm.py)."""

import numpy as np
import pytest

from paperflow.mi_gate import data as D
from paperflow.mi_gate import plan
from paperflow.mi_gate import train as TR
from paperflow.mi_gate import vlm as V

from .test_model import CFG

P = dict(n=120, type_probs=[0.4, 0.2, 0.2, 0.2], image_dim=16, image_noise=0.7, split=[0.7, 0.15, 0.15], seed=1,
         split_seed=42)


def _full_scale() -> dict:
    return {"vlm": "", "caption_max_new_tokens": 3, "image_size": 28, "question": "Yes. or No. ?",
            "caption_prompt": "describe the image", "tiny_hidden": 16, "tiny_layers": 1,
            "lora": {"r": 4, "alpha": 8, "dropout": 0.05,
                     "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
            "sft": {"epochs": 1, "lr": 1e-2, "warmup": 0.03, "effective_batch": 16}}


def _vlm_params() -> dict:
    return plan.vlm_params({"full_scale": _full_scale()})


def test_vlm_params_come_from_full_scale_and_only_vlm_jobs_get_them():
    v = _vlm_params()
    assert v["path"] is None and v["lora"]["target_modules"][0] == "q_proj" and v["sft"]["batch_size"] == 16
    cfg = {**CFG, "arms": ["gated"], "seeds": 1, "jobs": {"group_seeds": True}, "full_scale": {}}
    late = plan.train_params(cfg, "gated_t0.5", "all")
    assert "vlm" not in late and late["random_words"] == []  # late-fusion jobs: parameters unchanged


def test_parse_label_counts_a_non_answer_as_wrong():
    assert V.parse_label("Yes. it is") == 1 and V.parse_label("so No.") == 0
    assert V.parse_label("yes") == 1 and V.parse_label('"NO!" it says') == 0 and V.parse_label("yesterday") == V.UNPARSED
    assert V.parse_label("lamp river") == V.UNPARSED


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("image_files", [False, True])
def test_one_vlm_seed_self_captions_sfts_and_scores_every_condition(tmp_path, image_files):
    out = tmp_path / "synth"
    D.write_dataset(out, *D.generate(P))
    ds = D.load_dataset(out / "data.json", out / "image_features.npy")
    _, gate = TR.run_gate(ds, CFG)
    v = _vlm_params()
    if image_files:  # the authors' layout: <image_dir>/<id>.png
        (tmp_path / "img").mkdir()
        for d in ds.values():
            for i, im in zip(d.ids, V.images_of(d.image)):
                im.save(tmp_path / "img" / f"{int(i)}.png")
        v = {**v, "image_dir": str(tmp_path / "img")}
    p = {**CFG, "vlm": v, "eval": {**CFG["eval"], "conditions": ["clean", "noise2"]}}
    img = V.images_of(ds["train"].image[:1])[0]
    arr = np.asarray(img)[2::4, 2::4, 0].reshape(-1)[:16].astype(float)
    inside = (arr > 0) & (arr < 255)
    assert np.abs((arr - 128) / V.IMAGE_SCALE - ds["train"].image[0])[inside].max() <= 0.5 / V.IMAGE_SCALE + 1e-6
    r = V.run_seed_vlm("gated", 0.5, 0, ds, gate, p, tmp_path / "w")
    assert r["n_augmented"] == len(gate["selected"]["0.5"]) > 0
    assert r["sft_log"] and np.isfinite(r["final_loss"])
    for tv in ("T0", "T1"):
        for cond in ("clean", "noise2"):
            m = r["test"][tv][cond]
            assert 0.0 <= m["acc"] <= 1.0 and set(m) == {"acc", "vie", "consistency", "per_type"}
    assert r["test"]["T0"]["clean"]["consistency"] == 1.0  # clean against itself


@pytest.mark.filterwarnings("ignore")
def test_lora_sft_trains_only_the_adapters(tmp_path):
    import torch

    v = _vlm_params()
    model, proc = V.load(v, ["lamp"], seed=0)
    base = {k: t.detach().clone() for k, t in model.named_parameters()}
    rng = np.random.default_rng(0)
    ims = V.images_of(rng.normal(size=(16, 16)))
    y = np.arange(16) % 2
    peft_model, log = V.lora_sft(model, proc, V.sft_rows(ims, ["judge the picture"] * 16, y, v["question"]), v, 0, tmp_path)
    assert log and all(np.isfinite(h["loss"]) for h in log)
    lora = [n for n, t in peft_model.named_parameters() if t.requires_grad]
    assert lora and all("lora_" in n for n in lora)
    for n, t in peft_model.named_parameters():
        if "lora_" not in n:
            key = n.replace("base_model.model.", "", 1).replace(".base_layer", "")
            assert torch.equal(t, base[key]), n  # the base weights are frozen


def test_real_images_are_read_by_id_corrupted_on_pixels_and_drawn_back(tmp_path):
    from PIL import Image

    from paperflow.mi_gate.data import corrupt_image

    rng = np.random.default_rng(0)
    for i in (7, 9):
        Image.fromarray(rng.integers(0, 256, (40, 30, 3)).astype(np.uint8)).save(tmp_path / f"{i}.png")
    x = V.read_images([7, 9], tmp_path, 16)
    assert x.shape == (2, 16 * 16 * 3) and -1.0 <= x.min() and x.max() <= 1.0
    back = V.pixels_to_images(x, 16)
    assert np.abs(np.asarray(back[0], float) / 127.5 - 1 - x[0].reshape(16, 16, 3)).max() <= 0.5 / 127.5 + 1e-6
    occ = np.asarray(V.pixels_to_images(corrupt_image(x, "occlusion", rng), 16)[1])
    assert (occ[8:] == 128).all() and not (occ[:8] == 128).all()  # the bottom half is grey
    with pytest.raises(FileNotFoundError, match="record id 3"):
        V.read_images([3], tmp_path, 16)
    v = plan.vlm_params({"full_scale": _full_scale(), "data": {"source": "files", "files": {"image_dir": str(tmp_path)}}})
    assert v["image_dir"] == str(tmp_path) and v["image_size"] == 28
