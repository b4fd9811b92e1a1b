"""Training: every method runs; clean training labels cannot influence training; determinism."""

import copy

import numpy as np
import pytest

from paperflow.core.config import load_config
from paperflow.hashing import plan
from paperflow.hashing.data import load_pack, save_split, write_synthetic_mat
from paperflow.hashing.noise import make_record, write_record
from paperflow.hashing.train import lr_at, train_job, train_run

CFG = {"results_dir": "r", "data_dir": "d", "models_dir": "m",
       "hashing": {"enabled": True, "synthetic": {"n_train": 128, "n_test": 560, "d_img": 24, "d_txt": 16, "n_classes": 8},
                   "train": {"hidden": 16, "epochs": 3, "batch_size": 32, "restart_periods": [3]},
                   "rfcmh": {"warmup_epochs": 1}, "baselines": {"small_loss_warmup": 1, "label_smooth_eps": [0.1, 0.5]}}}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import yaml

    d = tmp_path_factory.mktemp("hash")
    (d / "c.yaml").write_text(yaml.safe_dump(CFG))
    cfg = load_config(d / "c.yaml")["hashing"]
    write_synthetic_mat(d / "p.mat", "xmedia", cfg["synthetic"])
    splits, _ = load_pack(d / "p.mat", "xmedia")
    for s in ("train", "val"):
        save_split(d / f"{s}.npz", splits[s])
        a, side = make_record(splits[s]["labels"], 0.5, "sym", 10 if s == "train" else 1010)
        write_record(d / f"{s}-rec.npz", d / f"{s}-rec.json", a, side)
    return d, cfg, splits


def _run(d, cfg, method, tag, train="train.npz", rec="train-rec.npz", **kw):
    p = plan.train_params(cfg, "synth", method, 16, "sym", "0.5", 10)
    m = train_run(p, d / train, d / "val.npz", d / rec, d / "val-rec.npz", d / f"{tag}.npz", d / f"{tag}.jsonl", **kw)
    if m is None:
        return None, None
    with np.load(d / f"{tag}.npz") as z:
        return m, {k: z[k] for k in z.files}


# stop after N epochs (over every candidate), rerun, compare with an uninterrupted run: label_smooth stops
# inside its second ε candidate, small_loss after its GMM selection started, rfcmh after warm-up
@pytest.mark.parametrize("method,stop", [("label_smooth", 4), ("small_loss", 2), ("rfcmh", 2)])
def test_resume_after_stop_gives_identical_weights(setup, method, stop):
    from paperflow.core.checkpoint import has_checkpoint

    d, cfg, _ = setup
    m_ref, ref = _ref(setup, method)
    ck = d / f"ckpt_{method}"
    m0, w0 = _run(d, cfg, method, f"res_{method}", ckpt_dir=ck, stop_after=stop)
    assert m0 is None and w0 is None and has_checkpoint(ck)
    assert not (d / f"res_{method}.npz").exists()  # a stopped job leaves no output that looks finished
    m1, w1 = _run(d, cfg, method, f"res_{method}", ckpt_dir=ck)
    assert not ck.exists()  # removed once the weights are written
    assert ref.keys() == w1.keys()
    for k in ref:
        assert np.array_equal(ref[k], w1[k]), k
    assert m1["selected"] == m_ref["selected"] and m1["epochs_run"] == m_ref["epochs_run"]
    assert (d / f"res_{method}.jsonl").read_text() == (d / f"{method}.jsonl").read_text()


def test_job_of_two_runs_resumes_after_a_kill_in_its_second_run(setup):
    """One training job trains a noise setting's seeds in one process. Killed in its second run (after the
    first finished) and rerun after Snakemake removed the job's outputs: the first run is restored from the
    copy the job keeps until it ends, the second resumes from its checkpoint; every array equals an
    uninterrupted job's."""
    d, cfg, _ = setup
    cells = [plan.train_params(cfg, "synth", "plain", 16, "sym", "0.5", s) for s in (10, 11)]
    assert cells[0]["train_seed"] != cells[1]["train_seed"]
    recs = ([d / "train-rec.npz"] * 2, [d / "val-rec.npz"] * 2)

    def job(tag, **kw):
        outs, logs = [d / f"{tag}{i}.npz" for i in (0, 1)], [d / f"{tag}{i}.jsonl" for i in (0, 1)]
        done = []
        res = train_job(cells, d / "train.npz", d / "val.npz", *recs, outs, logs, on_done=lambda i, m: done.append(i), **kw)
        return res, outs, logs, done

    ref, ref_outs, ref_logs, done = job("jobref")
    assert done == [0, 1] and [m["epochs_run"] for m in ref] == [3, 3]
    ck = [d / f"jobck{i}" for i in (0, 1)]
    res, outs, logs, done = job("job", ckpt_dirs=ck, stop_after=4)  # run 0 (3 epochs) done, run 1 killed after 1
    assert res is None and done == [0] and outs[0].exists() and not outs[1].exists()
    assert (ck[0] / "done" / "run.json").exists() and (ck[1] / "state.json").exists()
    for f in (*outs, *logs):  # Snakemake removes an interrupted job's outputs before it reruns the job
        f.unlink(missing_ok=True)
    res, outs, logs, done = job("job", ckpt_dirs=ck)
    assert done == [0, 1] and not any(c.exists() for c in ck)
    assert [m["selected"] for m in res] == [m["selected"] for m in ref]
    for a, b in zip(ref_outs + ref_logs, outs + logs, strict=True):
        assert a.stat().st_size > 0 and (a.suffix != ".jsonl" or a.read_text() == b.read_text())
    for a, b in zip(ref_outs, outs, strict=True):
        with np.load(a) as za, np.load(b) as zb:
            assert set(za.files) == set(zb.files) and all(np.array_equal(za[k], zb[k]) for k in za.files)
    # a different parameter set is not restored from a stale copy
    from paperflow.hashing.train import _keep_done, _restore_done

    _keep_done(d / "stale", cells[0], ref_outs[0], ref_logs[0], ref[0])
    assert _restore_done(d / "stale", cells[1], d / "x.npz", d / "x.jsonl") is None
    assert _restore_done(d / "stale", cells[0], d / "x.npz", d / "x.jsonl")["selected"] == ref[0]["selected"]


_REF: dict = {}


def _ref(setup, method):
    """An uninterrupted run of `method` (trained once per module, shared by the tests below)."""
    if method not in _REF:
        d, cfg, _ = setup
        _REF[method] = _run(d, cfg, method, method)
    return _REF[method]


@pytest.mark.parametrize("method", ["plain", "small_loss", "label_smooth", "rfcmh", "rfcmh_paper"])
def test_every_method_trains_and_exports_each_selection(setup, method):
    d, cfg, _ = setup
    m, w = _ref(setup, method)
    for sel in ("noisy_val", "clean_val", "last"):
        assert 1 <= m["selected"][sel]["epoch"] <= 3
        assert w[f"{sel}/img.0.weight"].shape == (16, 24) and w[f"{sel}/txt.4.weight"].shape == (16, 16)
        assert np.all(np.isfinite(w[f"{sel}/img.4.weight"]))
    assert m["selected"]["last"]["epoch"] == 3
    lines = (d / f"{method}.jsonl").read_text().splitlines()
    assert len(lines) == 3 * (2 if method == "label_smooth" else 1)
    if method == "label_smooth":
        assert m["selected"]["noisy_val"]["eps"] in (0.1, 0.5)
    if method == "small_loss":
        assert 0 <= m["small_loss_clean_frac_last"] <= 1
    if method == "rfcmh":
        assert 0 <= m["w_auroc_clean_last"] <= 1


def test_clean_training_labels_never_reach_training(setup):
    """Scrambling the clean labels (split file and record) changes nothing; changing noisy ones does."""
    d, cfg, splits = setup
    _, ref = _run(d, cfg, "rfcmh", "ref")
    tr = copy.deepcopy(splits["train"])
    tr["labels"] = np.roll(tr["labels"], 3, axis=1)
    save_split(d / "train_scrambled.npz", tr)
    with np.load(d / "train-rec.npz") as z:
        rec = {k: z[k] for k in z.files}
    rec["clean"] = np.roll(rec["clean"], 5, axis=1)
    np.savez(d / "rec_scrambled.npz", **rec)
    _, other = _run(d, cfg, "rfcmh", "scr", train="train_scrambled.npz", rec="rec_scrambled.npz")
    assert ref.keys() == other.keys()
    assert all(np.array_equal(ref[k], other[k]) for k in ref)  # also: same seed -> identical weights
    rec["noisy"] = np.roll(rec["noisy"], 1, axis=1)
    np.savez(d / "rec_noisy_changed.npz", **rec)
    _, changed = _run(d, cfg, "rfcmh", "chg", rec="rec_noisy_changed.npz")
    assert not np.array_equal(ref["last/img.4.weight"], changed["last/img.4.weight"])


def test_lr_schedule_restarts():
    tr = {"restart_periods": [4, 3], "restart_weights": [1.0, 0.5], "lr": 1.0, "eta_min": 0.0}
    assert lr_at(0, tr) == pytest.approx(1.0)
    assert lr_at(2, tr) == pytest.approx(0.5)
    assert lr_at(4, tr) == pytest.approx(0.5)  # restart at the second weight
    assert lr_at(7, tr) == pytest.approx(0.5)  # periods repeat the last one


@pytest.mark.parametrize("method", ["rfcmh", "small_loss"])
def test_multilabel_pack_trains(tmp_path, method):
    """The multi-label extension runs end to end on a synthetic database/test pack with flip noise."""
    import yaml

    cfg_d = copy.deepcopy(CFG)
    cfg_d["hashing"]["datasets"] = {"ml": {"format": "ml_dbtest", "synthetic": True, "n_train_ml": 128, "n_val_ml": 64}}
    cfg_d["hashing"]["synthetic"].update(n_classes=12, n_database_ml=240, n_query_ml=40)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg_d))
    cfg = load_config(tmp_path / "c.yaml")["hashing"]
    write_synthetic_mat(tmp_path / "p.mat", "ml_dbtest", cfg["synthetic"])
    splits, meta = load_pack(tmp_path / "p.mat", "ml_dbtest", 128, 64)
    for s in ("train", "val"):
        save_split(tmp_path / f"{s}.npz", splits[s])
        a, side = make_record(splits[s]["labels"], 0.5, "sym", 10)
        write_record(tmp_path / f"{s}-rec.npz", tmp_path / f"{s}-rec.json", a, side)
    p = plan.train_params(cfg, "ml", method, 16, "sym", "0.5", 10)
    assert p["multilabel"] is True
    m = train_run(p, tmp_path / "train.npz", tmp_path / "val.npz", tmp_path / "train-rec.npz", tmp_path / "val-rec.npz",
                  tmp_path / "w.npz", tmp_path / "l.jsonl")
    assert 0 < m["selected"]["noisy_val"]["val_score"] <= 1
    with np.load(tmp_path / "w.npz") as z:
        assert all(np.all(np.isfinite(z[k])) for k in z.files)
