"""TWLA W1.58A4 post-training quantization (KOTMS, E2M-ATQ, ILA-AMP); cross-study: quantized unlearning checkpoints.

Every stage is a plain function with explicit paths and a typed parameters object (built by the plan
function named in `@stage(plan=...)`, see plan.py); `paperflow quantization <stage>` is generated from
it. Heavy libraries are imported inside the functions.

Device: kotms, sens, weights, lac and eval decide once per job (`qmodel.job_device()`: CUDA when
torch sees a GPU, else CPU; hide the GPU with CUDA_VISIBLE_DEVICES= to force the CPU) and load the
model there in fp32. Outputs are moved to the CPU before safetensors/JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.core.memory import retain_freed_memory
from paperflow.quantization import plan


class Windows(TypedDict):
    seq_len: int
    calib_windows: int
    lac_windows: int
    sens_windows: int
    check_windows: int
    test_windows: int | None
    batch: int


class TinyParams(TypedDict):
    vocab_size: int
    d_model: int
    layers: int
    heads: int
    intermediate: int
    context: int
    batch: int
    steps: int
    lr: float
    weight_decay: float
    seed: int
    max_train_chars: int | None


class DataParams(TypedDict):
    corpus_format: str
    model_source: str
    model_path: str | None


class KotmsParams(TypedDict):
    iters: int
    lr: float
    rows_per_iter: int | None


class SensParams(TypedDict):
    data: Windows
    ilaamp: dict[str, Any]  # bits, base_bits
    clip: float


class WeightsParams(TypedDict):
    method: str
    options: dict[str, Any]  # methods.resolve: quantizer + the method's options
    e2m: dict[str, Any]
    data: Windows
    batch: int
    seed: int


class LacParams(TypedDict):
    bits: list[int]
    grid: list[float]
    data: Windows
    seed: int


class EvalParams(TypedDict, total=False):
    method: str
    act: str
    seed: int
    clip: float
    data: Windows
    bits: int | None  # uniform bit-width (None: ILA-AMP mixed precision)
    lac: bool  # use the LAC clips
    ilaamp: dict[str, Any]  # bits, avg_bits, beta (mixed precision only)
    zeroshot: dict[str, Any]  # paper scale only


class EvalGroupParams(TypedDict):
    """One job's activation settings of one (method, seed) (plan.eval_group_params)."""

    method: str
    seed: int
    group: str
    runs: list[EvalParams]


class ReportParams(TypedDict):
    seeds: list[int]
    runs: list[str]
    methods: dict[str, dict[str, Any]]
    model: dict[str, Any]
    corpus: dict[str, Any]
    data: Windows
    kotms: dict[str, Any]
    e2m: dict[str, Any]
    claims: dict[str, dict[str, Any]]


class UlQuantizeParams(TypedDict):
    scheme: str


class UlEvalParams(TypedDict):
    model: str
    schemes: list[str]
    seed: int


class UlReportParams(TypedDict):
    keys: list[list[Any]]  # [unlearning seed, model, scheme], the order of before/after/qdirs
    decoder: str
    judge: str
    claims: dict[str, dict[str, Any]]


@stage("tiny-lm", plan=plan.tiny_params)
def tiny_lm(params: TinyParams, *, corpus: Path, out: Path) -> dict:
    """Train the tiny Llama + BPE tokenizer (model.source = tiny)."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.lm.corpus import read_split
    from paperflow.lm.tiny import train_tiny_lm

    with Stage("quantization.tiny_lm", config=params, outputs=[out], inputs=[corpus], seed=params["seed"]) as st:
        with atomic_path(out) as tmp:
            st.metrics.update(train_tiny_lm(read_split(corpus, "train"), tmp, dict(params)))
    return st.metrics


@stage(plan=plan.data_params)
def data(params: DataParams, *, corpus: Path, model: Path, out: Path) -> dict:
    """Tokenize the corpus splits with the target model's tokenizer."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.quantization.data import build_tokens

    with Stage("quantization.data", config=params, outputs=[out], inputs=[corpus]) as st:
        with atomic_path(out) as tmp:
            st.metrics.update(build_tokens(corpus, params["corpus_format"], model, tmp))
    return st.metrics


@stage(plan=plan.kotms_params)
def kotms(params: KotmsParams, *, model: Path, out: Path, log: Path) -> dict:
    """Learn KOTMS Kronecker rotations for every decoder linear (weights only); log = kotms_log.json."""
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    import torch
    from safetensors.torch import save_file

    from paperflow.core.io import Stage, atomic_path, write_json
    from paperflow.core.progress import progress
    from paperflow.quantization.kotms import learn_kotms
    from paperflow.quantization.qmodel import job_device, load_fp_model, wrap_linears

    fp = load_fp_model(str(model), job_device())
    lins = wrap_linears(fp)
    gen = torch.Generator().manual_seed(0)  # CPU generator on every device: same row subsets
    tensors, logs = {}, {}
    with Stage("quantization.kotms", config=params, outputs=[out, log], inputs=[model], seed=0) as st:
        for name in progress(list(lins), desc="kotms"):
            C, B, lg = learn_kotms(lins[name].weight, params["iters"], params["lr"], params["rows_per_iter"], gen)
            C, B = C.cpu(), B.cpu()
            tensors[f"{name}.C"], tensors[f"{name}.B"] = C.contiguous(), B.contiguous()
            lg["orth_err"] = max(float((C.T @ C - torch.eye(C.shape[0])).abs().max()),
                                 float((B.T @ B - torch.eye(B.shape[0])).abs().max()))
            logs[name] = lg
        with atomic_path(out) as tmp:
            save_file(tensors, str(tmp))
        write_json(log, logs)
        st.metrics["mean_loss_first"] = sum(v["loss_first"] for v in logs.values()) / len(logs)
        st.metrics["mean_loss_last"] = sum(v["loss_last"] for v in logs.values()) / len(logs)
        st.metrics["max_orth_err"] = max(v["orth_err"] for v in logs.values())
        st.metrics["n_learned_kept"] = sum(v["learned_kept"] for v in logs.values())
        st.metrics["n_linears"] = len(logs)
    return st.metrics


def load_kotms(path: str | Path) -> dict:
    """{linear name: (C, B)} from kotms.safetensors."""
    from safetensors.torch import load_file

    t = load_file(str(path))
    names = {k.rsplit(".", 1)[0] for k in t}
    return {n: (t[f"{n}.C"], t[f"{n}.B"]) for n in names}


@stage(plan=plan.sens_params)
def sens(params: SensParams, *, model: Path, tokens: Path, kotms: Path, out: Path) -> dict:
    """ILA-AMP sensitivity sweep (delta, kappa) on validation windows, rotated FP model."""
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    from paperflow.core.io import Stage, write_json
    from paperflow.quantization.data import load_tokens, windows
    from paperflow.quantization.ilaamp import sensitivity_sweep
    from paperflow.quantization.qmodel import job_device, load_fp_model, wrap_linears

    fp = load_fp_model(str(model), job_device())
    rot = load_kotms(kotms)
    for name, lin in wrap_linears(fp).items():
        lin.set_rotation(*rot[name])  # moves C, B to the model's device
    win = windows(load_tokens(tokens), params["data"], "sens")
    with Stage("quantization.sens", config=params, outputs=[out], inputs=[model, tokens, kotms]) as st:
        result = sensitivity_sweep(fp, win, params["ilaamp"]["bits"], params["ilaamp"]["base_bits"], params["clip"],
                                   params["data"]["batch"])
        result["split"] = "valid"
        result["tokens"] = int(win.numel())
        write_json(out, result)
        st.metrics.update(nll0=result["nll0"], n_evals=result["n_evals"])
    return result


@stage(plan=plan.weights_params)
def weights(params: WeightsParams, *, model: Path, tokens: Path, out: Path, kotms: Path | None = None) -> dict:
    """Quantize the weights with one method and write the packed model dir (checked: packed NLL == fake-quant NLL)."""
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.seeding import seed_everything
    from paperflow.quantization.data import load_tokens, windows
    from paperflow.quantization.evaluate import mean_nll
    from paperflow.quantization.methods import METHODS, MethodContext
    from paperflow.quantization.qmodel import job_device, load_fp_model, wrap_linears
    from paperflow.quantization.store import load_quantized, save_quantized

    seed_everything(params["seed"])
    toks = load_tokens(tokens)
    dev = job_device()
    fp = load_fp_model(str(model), dev)
    wrap_linears(fp)
    ctx = MethodContext(options=params["options"], params=dict(params), seed=params["seed"],
                        calib=windows(toks, params["data"], "calib", params["seed"]),
                        kotms=load_kotms(kotms) if kotms else None)
    inputs = [model, tokens] + ([kotms] if kotms else [])
    with Stage("quantization.weights", config=params, outputs=[out], inputs=inputs, seed=params["seed"]) as st:
        records = METHODS[params["options"]["quantizer"]].quantize(fp, ctx)
        check = windows(toks, params["data"], "check")
        nll_fake = mean_nll(fp, check, params["batch"])
        with atomic_path(out) as tmp:
            mem = save_quantized(tmp, fp, records, model, params["method"])
            (tmp / "quantize_log.json").write_text(json.dumps(ctx.log, indent=1, sort_keys=True) + "\n")
            # free the fake-quant model before loading the packed one next to it (on a GPU: two
            # fp32 copies of the model otherwise); nll_fake is already computed
            del fp, records
            reloaded, _ = load_quantized(tmp, device=dev)
            nll_packed = mean_nll(reloaded, check, params["batch"])
        if nll_packed != nll_fake:
            raise RuntimeError(f"packed model NLL {nll_packed!r} != fake-quant NLL {nll_fake!r}")
        st.metrics.update(val_check_nll_fake=nll_fake, val_check_nll_packed=nll_packed,
                          bpw_linear=mem["bpw_linear"], bpw_model=mem["bpw_model"], file_bytes=mem["file_bytes"])
        ter = ctx.log.get("ternarize")
        if ter:
            st.metrics["err_stage1_sum"] = sum(v["err_stage1"] for v in ter.values())
            st.metrics["err_stage2_sum"] = sum(v["err_stage2"] for v in ter.values())
    return st.metrics


def _load_for(model: Path, qdir: Path | None):
    """The packed model (qdir given) or the FP model, on the job's device."""
    from paperflow.quantization.qmodel import job_device
    from paperflow.quantization.store import fp_model_wrapped, load_quantized

    dev = job_device()
    if qdir:
        return load_quantized(qdir, device=dev)[0]
    return fp_model_wrapped(model, dev)


@stage(plan=plan.lac_params)
def lac(params: LacParams, *, model: Path, tokens: Path, out: Path, qdir: Path | None = None) -> dict:
    """LAC: per-linear activation clip per bit-width on train windows (qdir: packed model; none: FP)."""
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    from paperflow.core.io import Stage, write_json
    from paperflow.quantization.data import load_tokens, windows
    from paperflow.quantization.lac import calibrate_clips

    m = _load_for(model, qdir)
    win = windows(load_tokens(tokens), params["data"], "lac", params["seed"])
    inputs = [tokens] + ([qdir] if qdir else [model])
    with Stage("quantization.lac", config=params, outputs=[out], inputs=inputs, seed=params["seed"]) as st:
        clips = calibrate_clips(m, win, params["bits"], params["grid"], params["data"]["batch"])
        write_json(out, clips)
        for b in params["bits"]:
            st.metrics[f"mean_clip_a{b}"] = sum(c[b] for c in clips.values()) / len(clips)
    return clips


@stage("eval", plan=plan.eval_params)
def evaluate(params: EvalParams, *, model: Path, tokens: Path, out: Path, qdir: Path | None = None,
             lac: Path | None = None, sens: Path | None = None) -> dict:
    """Test perplexity of one (method, activation setting); mixed-precision bits chosen from sens.json."""
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    return _evaluate_loaded(_load_for(model, qdir), params, model=model, tokens=tokens, out=out, qdir=qdir, lac=lac,
                            sens=sens)


@stage("eval-group", plan=plan.eval_group_params)
def evaluate_group(params: EvalGroupParams, *, model: Path, tokens: Path, out: list[Path], qdir: Path | None = None,
                   lac: Path | None = None, sens: Path | None = None) -> list[dict]:
    """Several activation settings of one (method, seed) in one process: the packed model is loaded once
    and each setting is evaluated and written exactly as `eval` would (its own JSON and manifest; the
    activation bits and clips of every linear are set afresh for each). `out` pairs with `params.runs`."""
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    runs = params["runs"]
    if len(out) != len(runs):
        raise ValueError(f"eval-group: {len(runs)} settings but {len(out)} --out files")
    for r, o in zip(runs, out):
        if r["method"] != params["method"] or r["seed"] != params["seed"] or Path(o).stem != r["act"]:
            raise ValueError(f"eval-group: --out {o} does not belong to {params['method']}/{r['act']} (seed {r['seed']})")
    m = _load_for(model, qdir)
    return [_evaluate_loaded(m, r, model=model, tokens=tokens, out=o, qdir=qdir, lac=lac, sens=sens)
            for r, o in zip(runs, out)]


def _evaluate_loaded(m, params: EvalParams, *, model: Path, tokens: Path, out: Path, qdir: Path | None,
                     lac: Path | None, sens: Path | None) -> dict:
    from paperflow.core.io import Stage, read_json, write_json
    from paperflow.quantization.data import load_tokens, windows
    from paperflow.quantization.evaluate import perplexity
    from paperflow.quantization.ilaamp import chain_dp, tables
    from paperflow.quantization.qmodel import set_activation_bits

    L = len(m.model.layers)
    clips = None
    if params["lac"]:
        if lac is None:
            raise ValueError(f"activation setting {params['act']!r} uses LAC clips: pass --lac")
        clips = {n: {int(b): v for b, v in c.items()} for n, c in read_json(lac).items()}
    result: dict[str, Any] = {"method": params["method"], "act": params["act"], "seed": params["seed"]}
    if "ilaamp" in params:
        if sens is None:
            raise ValueError(f"activation setting {params['act']!r} is mixed precision: pass --sens")
        d, k, bits = tables(read_json(sens))
        ip = params["ilaamp"]
        budget = int(round(ip["avg_bits"] * L))
        bb, obj = chain_dp(d, k, bits, budget, ip["beta"])
        result.update(block_bits=bb, dp_objective=obj, budget=budget, budget_used=sum(bb), avg_bits=sum(bb) / L)
    else:
        bb = [int(params["bits"])] * L
        result.update(block_bits=bb, avg_bits=float(params["bits"]))
    set_activation_bits(m, bb, clips=clips, default_clip=params["clip"])
    test = windows(load_tokens(tokens), params["data"], "test")
    inputs = [x for x in (qdir or model, tokens, lac, sens) if x]
    with Stage("quantization.eval", config=params, outputs=[out], inputs=inputs) as st:
        result["test"] = perplexity(m, test, params["data"]["batch"])
        result["split"] = "test"
        zs = params.get("zeroshot")
        if zs:  # paper scale only (optional dependency lm-eval)
            from transformers import AutoTokenizer

            from paperflow.quantization.zeroshot import EVALUATORS

            tok = AutoTokenizer.from_pretrained(qdir or model)
            result["zeroshot"] = EVALUATORS[zs["evaluator"]](m, tok, zs["tasks"], zs["batch_size"], zs["limit"])
            st.metrics["zeroshot_avg"] = result["zeroshot"]["avg"]
        if qdir:
            result["memory"] = read_json(Path(qdir) / "memory.json")
        write_json(out, result)
        st.metrics.update(test_ppl=result["test"]["ppl"], avg_bits=result["avg_bits"])
    return result


@stage(plan=plan.report_params)
def report(params: ReportParams, *, results: Path, evals: list[Path], sens: Path | None = None,
           kotms_log: Path | None = None, cross: Path | None = None) -> dict:
    """metrics.json, perplexity figure and summary.md (claims through core.verdict) from the eval outputs."""
    from paperflow.quantization.report import build_report

    return build_report(results, evals, dict(params), sens=sens, kotms_log=kotms_log, cross=cross)


# ---------------------------------------------------------------- cross-study: unlearning checkpoints
@stage("ul-quantize", plan=plan.ul_quantize_params)
def ul_quantize(params: UlQuantizeParams, *, model: Path, original: Path, out: Path) -> dict:
    """Cross-study: weight-only RTN quantization of an unlearning checkpoint (dense export)."""
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    from paperflow.core.io import Stage, atomic_path
    from paperflow.quantization.cross_unlearning import quantize_checkpoint

    with Stage("quantization.ul_quantize", config=params, outputs=[out], inputs=[model, original]) as st:
        with atomic_path(out) as tmp:
            st.metrics.update(quantize_checkpoint(model, original, params["scheme"], tmp))
    return st.metrics


@stage("ul-eval", plan=plan.ul_eval_params)
def ul_eval(params: UlEvalParams, *, model: Path, original: Path, data: Path, ref_samples: Path, ref_metrics: Path,
            qdirs: list[Path], out: list[Path], tokenizer: Path | None = None) -> dict:
    """Cross-study: quantize one unlearning checkpoint with every scheme (params.schemes, in the order of
    --qdirs/--out) and measure leak@k of each, sampled and judged exactly as the unlearning pipeline did
    its FP version.

    Each quantized model is written as `ul-quantize` writes it (dense export + manifest). The sampling
    and judging parameters are those recorded in the manifests of the unlearning pipeline's own outputs
    for the same (model, seed) (`ref_samples`, `ref_metrics`); the work is done by the unlearning study's
    public CLI stage `paperflow unlearning sample` with --metrics (one subprocess for all schemes: nothing
    of the unlearning package is imported here). Writes each `out` (metrics.json) and samples.jsonl
    beside it.
    """
    retain_freed_memory()  # model-sized temporaries: reuse freed memory, not fresh mmaps (core.memory)
    import subprocess
    import sys

    from paperflow.quantization.cross_unlearning import evaluate_params_from_manifests

    schemes = list(params["schemes"])
    if not len(schemes) == len(qdirs) == len(out):
        raise ValueError(f"ul-eval: {len(schemes)} schemes but {len(qdirs)} --qdirs, {len(out)} --out")
    for scheme, qd in zip(schemes, qdirs):
        ul_quantize({"scheme": scheme}, model=model, original=original, out=qd)
    names = [f"{params['model']}__{sc}" for sc in schemes]
    per = [evaluate_params_from_manifests(ref_samples, ref_metrics, n) for n in names]
    group = {"seed": int(params["seed"]), "models": names, "sample": {n: q["sample"] for n, q in zip(names, per)},
             "judge": per[0]["judge"]}
    out = [Path(o) for o in out]
    cmd = [sys.executable, "-m", "paperflow.cli", "unlearning", "sample", "--params", json.dumps(group, sort_keys=True),
           "--data", str(data), "--models", *map(str, qdirs), "--samples", *[str(o.parent / "samples.jsonl") for o in out],
           "--metrics", *map(str, out)]
    if tokenizer:
        cmd += ["--tokenizer", str(tokenizer)]
    subprocess.run(cmd, check=True)
    missing = [str(o) for o in out if not o.is_file()]
    if missing:
        raise FileNotFoundError(f"paperflow unlearning sample did not write {missing}")
    return group


@stage("ul-report", plan=plan.ul_report_params)
def ul_report(params: UlReportParams, *, before: list[Path], after: list[Path], qdirs: list[Path], out: Path,
              figure: Path) -> dict:
    """Cross-study: leak@k before/after quantization over every unlearning seed (table, figure, claim inputs).

    before/after/qdirs are in the order of params["keys"] ([seed, model, scheme]): the unlearning
    pipeline's judged metrics of the FP model, the metrics of the quantized model, its quantized dir.
    """
    from paperflow.core.io import Stage
    from paperflow.quantization.cross_unlearning import build_cross_report

    if not len(before) == len(after) == len(qdirs) == len(params["keys"]):
        raise ValueError(f"ul-report: {len(params['keys'])} keys but {len(before)} before, {len(after)} after, "
                         f"{len(qdirs)} qdirs")
    keys = [(int(s), str(m), str(sc)) for s, m, sc in params["keys"]]
    with Stage("quantization.ul_report", config=params, outputs=[out, figure], inputs=[*before, *after]) as st:
        res = build_cross_report(out, figure, keys, before, after, qdirs, params["decoder"], params["judge"])
        st.metrics["rows"] = len(res["rows"])
    return res
