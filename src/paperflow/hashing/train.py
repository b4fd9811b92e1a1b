"""Training of one run (method x code length x noise setting x seed) under accelerate.

Labels come only from noise records (`noise.read_noisy`); the clean training labels are never
read (split files are opened with `with_labels=False`). Per epoch the model is scored on the
validation split (mean of I2T and T2I mAP@all) under the *noisy* validation labels (`noisy_val`,
default) and, as a secondary paper-protocol row, the clean ones (`clean_val`); the best weights
for each rule and the last ones are exported as numpy arrays (one `.npz`). Only the main process writes.

The method's loss, its hyper-parameter candidates, its per-epoch sample selection and its reliability
diagnostic come from the method registry (`paperflow.hashing.methods`). Every `ckpt_every` epochs the
whole training state (model, optimizer, RNGs, the best snapshot per selection rule, finished candidates,
the epoch log) is saved with `paperflow.core.checkpoint` (safetensors + JSON) to `ckpt_dir`; a rerun
resumes from it and ends with the same weights as an uninterrupted run (tests/hashing/test_train.py).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("paperflow.hashing.train")


def lr_at(epoch: int, tr: Mapping[str, Any]) -> float:
    """Cosine annealing with warm restarts (0-based epoch); periods repeat the last one if needed."""
    periods, weights = list(tr["restart_periods"]), list(tr["restart_weights"])
    e, k = epoch, 0
    while True:
        T = periods[min(k, len(periods) - 1)]
        if e < T:
            break
        e -= T
        k += 1
    w = weights[min(k, len(weights) - 1)]
    return tr["eta_min"] + (w * tr["lr"] - tr["eta_min"]) * (1 + math.cos(math.pi * e / T)) / 2


def _auroc(score: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of `score` for the `positive` class: the Mann-Whitney statistic with
    average ranks for ties (what `sklearn.metrics.roc_auc_score` computes; numpy only, so that a job does
    not import scikit-learn and scipy.stats for it); None when one class is empty."""
    positive = np.asarray(positive, bool)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    _, inv, counts = np.unique(np.asarray(score, np.float64), return_inverse=True, return_counts=True)
    before = np.cumsum(counts) - counts                 # items strictly below each distinct value
    avg_rank = before + (counts + 1) / 2.0               # 1-based average rank of each distinct value
    u = float(avg_rank[inv.ravel()][positive].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def _batched_tensors_class() -> Any:
    import torch

    class BatchedTensors(torch.utils.data.TensorDataset):
        """A TensorDataset that the DataLoader indexes once per batch (`__getitems__`) instead of once per
        item followed by `torch.stack`: the same sampler, the same rows in the same order, ≈ 6% of a run's time
        saved."""

        def __getitems__(self, idx: list[int]) -> tuple[Any, ...]:
            index = torch.as_tensor(idx, dtype=torch.long)
            return tuple(t[index] for t in self.tensors)

    return BatchedTensors


def _BatchedTensors(*tensors: Any) -> Any:  # noqa: N802 (a class built lazily: torch is imported inside functions)
    return _batched_tensors_class()(*tensors)


def _as_batch(batch: Any) -> Any:
    """collate_fn for `_BatchedTensors`: the batch is already stacked."""
    return batch


class _Bundle:
    """Everything tensor-valued a checkpoint holds, behind one state_dict()/load_state_dict() so that
    `core.checkpoint.save_training_state` writes it as one safetensors file: the live network, the best
    snapshot per selection rule of the current candidate, every finished candidate's snapshots and the
    small-loss clean mask."""

    def __init__(self, net: Any, best: dict[str, Any], done: list[Any], clean_mask: Any) -> None:
        self.net, self.best, self.done, self.clean_mask = net, best, done, clean_mask

    def state_dict(self) -> dict[str, Any]:
        import torch

        sd = {f"net.{k}": v for k, v in self.net.state_dict().items()}
        for sel, (_, _, w) in self.best.items():
            sd.update({f"best.{sel}.{k}": torch.from_numpy(v) for k, v in w.items()})
        for i, (_, best) in enumerate(self.done):
            for sel, (_, _, w) in best.items():
                sd.update({f"done{i}.{sel}.{k}": torch.from_numpy(v) for k, v in w.items()})
        sd["clean_mask"] = self.clean_mask
        return sd

    def load_state_dict(self, sd: Mapping[str, Any], strict: bool = True) -> None:
        self.net.load_state_dict({k[4:]: v for k, v in sd.items() if k.startswith("net.")})

        def pick(prefix: str) -> dict[str, dict[str, np.ndarray]]:
            out: dict[str, dict[str, np.ndarray]] = {}
            for k, v in sd.items():
                if k.startswith(prefix):
                    sel, name = k[len(prefix):].split(".", 1)
                    out.setdefault(sel, {})[name] = v.numpy().copy()
            return out

        self.snap_best = pick("best.")
        self.snap_done = [pick(f"done{i}.") for i in range(len(self.done))]
        self.clean_mask = sd["clean_mask"]


def _pack_best(best: Mapping[str, tuple[float, int, Any]]) -> dict[str, list[float | int]]:
    return {sel: [sc, ep] for sel, (sc, ep, _) in best.items()}


def train_run(p: Mapping[str, Any], train_path: str | Path, val_path: str | Path, rec_train: str | Path,
              rec_val: str | Path, out: str | Path, log_path: str | Path, ckpt_dir: str | Path | None = None,
              stop_after: int | None = None, status: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Train one run; returns the metrics dict on the main process (None elsewhere, and None when
    `stop_after` epochs (counted over every candidate) have run: the job then stops after its checkpoint,
    as a killed job would, and writes no outputs). With `ckpt_dir`, resumes from a checkpoint there.
    `status` (a dict, optional) receives `main` (this is the main process), `stopped` and `epochs_trained`."""
    import torch
    from accelerate import Accelerator

    from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state
    from paperflow.core.seeding import seed_everything
    from paperflow.hashing import model as M
    from paperflow.hashing.data import load_split
    from paperflow.hashing.evaluate import both_directions, to_bits
    from paperflow.hashing.methods import Batch
    from paperflow.hashing.methods import get as get_method
    from paperflow.hashing.noise import read_changed, read_noisy

    acc = Accelerator(cpu=not torch.cuda.is_available())
    t0 = time.perf_counter()
    status = {} if status is None else status
    status.update(main=acc.is_main_process, stopped=False, epochs_trained=0)

    tr_split = load_split(train_path, with_labels=False)  # clean labels never loaded here
    va_split = load_split(val_path, with_labels=True)     # clean val labels: `clean_val` rule only
    y_train = read_noisy(rec_train)
    y_val_noisy = read_noisy(rec_val)
    changed_train = read_changed(rec_train)               # diagnostics only
    if y_train.shape[0] != tr_split["img"].shape[0] or y_val_noisy.shape[0] != va_split["img"].shape[0]:
        raise ValueError("noise record and split sizes differ")
    K = y_train.shape[1]
    ml = bool(p["multilabel"])
    tr = p["train"]
    method = get_method(p["method"])
    mp = p["method_params"]
    grid = method.grid(mp)

    x_img = torch.from_numpy(tr_split["img"])
    x_txt = torch.from_numpy(tr_split["txt"])
    y_t = torch.from_numpy(y_train.astype(np.int64))
    v_img, v_txt = torch.from_numpy(va_split["img"]), torch.from_numpy(va_split["txt"])

    def encode_bits(net: Any, a: torch.Tensor, b: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        net.eval()
        with torch.no_grad():
            o1 = net.img(a.to(acc.device)).cpu().numpy()
            o2 = net.txt(b.to(acc.device)).cpu().numpy()
        return to_bits(o1), to_bits(o2)

    def score(net: Any) -> dict[str, float]:
        bi, bt = encode_bits(net, v_img, v_txt)
        codes = {"q_img": bi, "q_txt": bt, "db_img": bi, "db_txt": bt}
        nv = both_directions(codes, y_val_noisy, y_val_noisy, p["bits"])
        cv = both_directions(codes, va_split["labels"], va_split["labels"], p["bits"])
        return {"noisy_val": nv["mean"], "clean_val": cv["mean"], "noisy_val_i2t": nv["i2t"], "noisy_val_t2i": nv["t2i"]}

    def export(net: Any) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}

    # resume point: (candidate index, epochs done in it), the finished candidates and the epoch log
    resume: dict[str, Any] | None = None
    if ckpt_dir is not None and has_checkpoint(ckpt_dir):
        import json as _json

        resume = _json.loads((Path(ckpt_dir) / "state.json").read_text())["extra"]
        log.info("resuming from %s: candidate %d, epoch %d", ckpt_dir, resume["cand"], resume["epoch"])
    candidates: list[tuple[dict[str, Any], dict[str, tuple[float, int, dict[str, np.ndarray]]]]] = []
    epoch_log: list[dict[str, Any]] = list(resume["epoch_log"]) if resume else []
    epochs_run = 0
    for ci, cand in enumerate(grid):
        if resume and ci < resume["cand"]:
            continue  # finished before the checkpoint: restored below with the first resumed candidate
        seed_everything(int(p["train_seed"]))
        net = M.HashNet(x_img.shape[1], x_txt.shape[1], tr["hidden"], p["bits"], K, int(p["train_seed"]))
        opt = torch.optim.Adam(net.parameters(), lr=tr["lr"], betas=(0.9, 0.999), weight_decay=mp["weight_decay"])
        ds = _BatchedTensors(x_img, x_txt, y_t, torch.arange(len(y_t)))
        gen = torch.Generator().manual_seed(int(p["train_seed"]))
        loader = torch.utils.data.DataLoader(ds, batch_size=tr["batch_size"], shuffle=True, drop_last=True,
                                             generator=gen, collate_fn=_as_batch)
        net, opt, loader = acc.prepare(net, opt, loader)
        raw = acc.unwrap_model(net)
        W = raw.W
        best: dict[str, tuple[float, int, dict[str, np.ndarray]]] = {}
        clean_mask = torch.ones(len(y_t), dtype=torch.bool)
        first_epoch = 1
        if resume and ci == resume["cand"]:
            bundle = _Bundle(raw, {}, [None] * ci, clean_mask)
            load_training_state(ckpt_dir, model=bundle, optimizer=opt)  # type: ignore[arg-type]
            gen.set_state(torch.tensor(resume["gen_state"], dtype=torch.uint8))
            clean_mask = bundle.clean_mask
            best = {sel: (float(sc), int(ep), bundle.snap_best[sel]) for sel, (sc, ep) in resume["best"].items()}
            candidates = [(dict(c), {sel: (float(sc), int(ep), bundle.snap_done[i][sel])
                                     for sel, (sc, ep) in b.items()})
                          for i, (c, b) in enumerate(resume["done"])]
            first_epoch = int(resume["epoch"]) + 1
            resume = None

        for epoch in range(first_epoch, tr["epochs"] + 1):
            for g in opt.param_groups:
                g["lr"] = lr_at(epoch - 1, tr)
            diag: dict[str, Any] = {}
            if method.before_epoch is not None:
                sel_out = method.before_epoch(epoch, raw, x_img, x_txt, y_t, W, mp, ml, acc.device, changed_train)
                if sel_out is not None:
                    clean_mask, diag = sel_out
            raw.train()
            tot, nb = 0.0, 0
            for xb_i, xb_t, yb, idx in loader:
                z1, z2 = net(xb_i, xb_t)
                loss = method.loss(Batch(epoch, z1, z2, yb, idx, W, mp, ml, cand, clean_mask.to(yb.device)))
                opt.zero_grad(set_to_none=True)
                acc.backward(loss)
                acc.clip_grad_norm_(net.parameters(), tr["clip"])
                opt.step()
                tot += float(loss.detach())
                nb += 1
            rec: dict[str, Any] = {**cand, "epoch": epoch, "lr": opt.param_groups[0]["lr"],
                                   "loss": tot / max(nb, 1), **diag}
            if epoch % tr["eval_every"] == 0 or epoch == tr["epochs"]:
                s = score(raw)
                rec.update(s)
                for sel in ("noisy_val", "clean_val"):
                    if sel not in best or s[sel] > best[sel][0]:
                        best[sel] = (s[sel], epoch, export(raw))
                if method.reliability is not None and epoch > mp[method.warmup_key or "warmup_epochs"]:
                    w = _reliability_all(method, raw, x_img, x_txt, y_t, W, mp, ml, tr["batch_size"], acc.device)
                    rec["w_auroc_clean"] = _auroc(w, ~changed_train)
            epoch_log.append(rec)
            if acc.is_main_process:
                log.info(json.dumps(rec))
            epochs_run += 1
            status["epochs_trained"] = epochs_run
            last_of_cand = epoch == tr["epochs"]
            if ckpt_dir is not None and not last_of_cand and (epoch % tr["ckpt_every"] == 0 or stop_after == epochs_run):
                if acc.is_main_process:
                    save_training_state(
                        ckpt_dir, model=_Bundle(raw, best, candidates, clean_mask), optimizer=opt, step=epoch,
                        extra={"cand": ci, "epoch": epoch, "gen_state": gen.get_state().tolist(),
                               "best": _pack_best(best), "done": [[c, _pack_best(b)] for c, b in candidates],
                               "epoch_log": epoch_log})
                acc.wait_for_everyone()
            if stop_after is not None and epochs_run >= stop_after:
                status["stopped"] = True
                return None
        best["last"] = (epoch_log[-1]["noisy_val"], tr["epochs"], export(raw))
        candidates.append((cand, best))
        acc.free_memory()

    # per selection rule: pick the candidate (e.g. label_smooth's ε) and epoch on that rule's validation
    # score; `last` picks the candidate by the noisy-validation score at the final epoch.
    chosen: dict[str, dict[str, Any]] = {}
    for sel in p["train"]["selections"]:
        key = "noisy_val" if sel == "last" else sel
        cand, best = max(candidates, key=lambda c: c[1]["last" if sel == "last" else key][0])
        sc, ep, wts = best[sel]
        chosen[sel] = {**cand, "epoch": ep, "val_score": sc, "weights": wts}
    metrics = {"selected": {s: {k: v for k, v in c.items() if k != "weights"} for s, c in chosen.items()},
               "train_wall_s": round(time.perf_counter() - t0, 3), "n_processes": acc.num_processes,
               "epochs_run": len(epoch_log)}
    auc = [r["w_auroc_clean"] for r in epoch_log if r.get("w_auroc_clean") is not None]
    if auc:
        metrics["w_auroc_clean_mean_after_warmup"] = float(np.mean(auc))
        metrics["w_auroc_clean_last"] = auc[-1]
    fr = [r for r in epoch_log if "sl_noisy_frac_in_clean" in r]
    if fr:
        metrics["small_loss_noisy_frac_in_clean_last"] = fr[-1]["sl_noisy_frac_in_clean"]
        metrics["small_loss_clean_frac_last"] = fr[-1]["sl_clean_frac"]

    acc.wait_for_everyone()
    if not acc.is_main_process:
        return None
    from paperflow.core.io import atomic_path, write_text

    arrays: dict[str, np.ndarray] = {}
    for sel, c in chosen.items():
        for k, v in c["weights"].items():
            arrays[f"{sel}/{k}"] = v
        arrays[f"{sel}/_epoch"] = np.array(c["epoch"])
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    write_text(log_path, "".join(json.dumps(r, default=float) + "\n" for r in epoch_log))
    if ckpt_dir is not None:
        shutil.rmtree(ckpt_dir, ignore_errors=True)  # finished: the outputs supersede the checkpoint
    return metrics


def train_job(cells: list[Mapping[str, Any]], train_path: str | Path, val_path: str | Path,
              rec_train: list[str | Path], rec_val: list[str | Path], outs: list[str | Path], logs: list[str | Path],
              ckpt_dirs: list[str | Path] | None = None, stop_after: int | None = None,
              on_done: Any = None) -> list[dict[str, Any]] | None:
    """Train the runs of one job one after the other in this process (the interpreter, torch and accelerate
    start once per job, not once per run); run i reads `rec_train[i]`/`rec_val[i]` and writes `outs[i]`,
    `logs[i]`; `on_done(i, metrics)` runs on the main process after each run's outputs exist (the stage writes
    the run's manifest there).

    Resumable across runs: with `ckpt_dirs`, run i checkpoints into `ckpt_dirs[i]` (see `train_run`), and once
    it has finished a copy of its outputs and metrics is kept in `ckpt_dirs[i]/done/` until the whole job
    has finished, so a rerun of an interrupted job restores the finished runs (same parameters only) and
    resumes the interrupted one from its checkpoint. `stop_after` counts epochs over the whole job (tests: a
    job killed in its second run). Returns every run's metrics on the main process, else None."""
    import gc

    import accelerate  # noqa: F401  (imported before the freeze below)
    import torch  # noqa: F401

    # Objects that live for the whole process (modules, torch's op registry) are moved out of the collector's
    # reach, so the `gc.collect` of `accelerate.free_memory` after each candidate does not walk them again.
    gc.freeze()
    n = len(cells)
    if not (len(rec_train) == len(rec_val) == len(outs) == len(logs) == n) or (ckpt_dirs and len(ckpt_dirs) != n):
        raise ValueError(f"one training job of {n} runs needs {n} noise records, outputs and logs each")
    results: list[dict[str, Any]] = []
    main = True
    trained = 0
    for i, p in enumerate(cells):
        ck = Path(ckpt_dirs[i]) if ckpt_dirs else None
        done = ck / "done" if ck is not None else None
        m = _restore_done(done, p, outs[i], logs[i]) if done is not None else None
        if m is None:
            st: dict[str, Any] = {}
            left = None if stop_after is None else stop_after - trained
            if left is not None and left <= 0:
                return None
            m = train_run(p, train_path, val_path, rec_train[i], rec_val[i], outs[i], logs[i], ckpt_dir=ck,
                          stop_after=left, status=st)
            trained += st.get("epochs_trained", 0)
            main = bool(st.get("main", True))
            if st.get("stopped"):
                return None
            if m is not None and done is not None:
                _keep_done(done, p, outs[i], logs[i], m)
        if m is not None:
            if on_done is not None:
                on_done(i, m)
            results.append(m)
    if ckpt_dirs and main:
        for ck in ckpt_dirs:
            shutil.rmtree(ck, ignore_errors=True)  # the whole job finished: its outputs supersede the copies
    return results if main else None


def _keep_done(done: Path, p: Mapping[str, Any], out: str | Path, log_path: str | Path, metrics: Mapping[str, Any]) -> None:
    from paperflow.core.io import write_json

    done.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out, done / "weights.npz")
    shutil.copyfile(log_path, done / "log.jsonl")
    write_json(done / "run.json", {"params": dict(p), "metrics": dict(metrics)})  # written last: marks it complete


def _restore_done(done: Path, p: Mapping[str, Any], out: str | Path, log_path: str | Path) -> dict[str, Any] | None:
    """The metrics of a run an earlier attempt of this job finished with the same parameters (its outputs
    copied back into place), else None."""
    f = done / "run.json"
    if not f.exists():
        return None
    saved = json.loads(f.read_text())
    if saved["params"] != json.loads(json.dumps(dict(p))):
        return None
    from paperflow.core.io import atomic_path

    for src, dst in ((done / "weights.npz", out), (done / "log.jsonl", log_path)):
        with atomic_path(dst) as tmp:
            shutil.copyfile(src, tmp)
    log.info("restored a run this job finished before it was interrupted: %s", out)
    return dict(saved["metrics"])


def _reliability_all(method: Any, raw: Any, x_img: Any, x_txt: Any, y: Any, W: Any, mp: Mapping[str, Any], ml: bool,
                     batch_size: int, device: Any) -> np.ndarray:
    """The method's reliability weight of every training pair (batches of the training batch size, index order)."""
    import torch

    raw.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(y), batch_size):
            sl = slice(s, min(len(y), s + batch_size))
            z1, z2 = raw(x_img[sl].to(device), x_txt[sl].to(device))
            out.append(method.reliability(z1, z2, y[sl].to(device), W, mp, ml).cpu())
    return torch.cat(out).numpy()
