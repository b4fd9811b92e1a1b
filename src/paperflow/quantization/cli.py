"""`paperflow quantization <stage>`: tiny-lm, data, kotms, sens, weights, lac, eval, report.
Heavy imports happen inside the run functions.

Device: kotms, sens, weights, lac and eval decide once per job (`qmodel.job_device()`: CUDA when
torch sees a GPU, else CPU; hide the GPU with CUDA_VISIBLE_DEVICES= to force the CPU) and load the
model there in fp32. Outputs are moved to the CPU before safetensors/JSON. On the CPU the results
are those of the CPU-only code; the CUDA path is untested on a real GPU (none was available)."""

from __future__ import annotations

import argparse

from paperflow.core.cli import Study, add_config_args, job_params

study = Study("quantization", "TWLA W1.58A4 post-training quantization (KOTMS, E2M-ATQ, ILA-AMP)")
STUDIES = [study]
NAME = "quantization"


def _threads() -> None:
    import os

    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


@study.stage("tiny-lm", "train the tiny Llama + BPE tokenizer (model.source = tiny)")
def _tiny(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--corpus", required=True)
    p.add_argument("--out", required=True)

    def run(args):
        from paperflow.core.io import Stage, atomic_path
        from paperflow.lm.corpus import read_split
        from paperflow.lm.tiny import train_tiny_lm
        from paperflow.quantization.plan import tiny_params

        _threads()
        prm = job_params(args, NAME, tiny_params)
        with Stage("quantization.tiny_lm", config=prm, outputs=[args.out], inputs=[args.corpus], seed=prm["seed"]) as st:
            with atomic_path(args.out) as tmp:
                st.metrics.update(train_tiny_lm(read_split(args.corpus, "train"), tmp, prm))

    return run


@study.stage("data", "tokenize the corpus splits with the target model's tokenizer")
def _data(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--corpus", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)

    def run(args):
        from paperflow.core.io import Stage, atomic_path
        from paperflow.quantization.data import build_tokens
        from paperflow.quantization.plan import data_params

        prm = job_params(args, NAME, data_params)
        with Stage("quantization.data", config=prm, outputs=[args.out], inputs=[args.corpus]) as st:
            with atomic_path(args.out) as tmp:
                st.metrics.update(build_tokens(args.corpus, prm["corpus_format"], args.model, tmp))

    return run


@study.stage("kotms", "learn KOTMS Kronecker rotations for every decoder linear (weights only)")
def _kotms(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log", required=True, help="kotms_log.json")

    def run(args):
        import torch
        from safetensors.torch import save_file

        from paperflow.core.io import Stage, atomic_path, write_json
        from paperflow.core.progress import progress
        from paperflow.quantization.kotms import learn_kotms
        from paperflow.quantization.plan import kotms_params
        from paperflow.quantization.qmodel import job_device, load_fp_model, wrap_linears

        _threads()
        prm = job_params(args, NAME, kotms_params)
        model = load_fp_model(args.model, job_device())
        lins = wrap_linears(model)
        gen = torch.Generator().manual_seed(0)  # CPU generator on every device: same row subsets
        tensors, log = {}, {}
        with Stage("quantization.kotms", config=prm, outputs=[args.out, args.log], inputs=[args.model], seed=0) as st:
            for name in progress(list(lins), desc="kotms"):
                C, B, lg = learn_kotms(lins[name].weight, prm["iters"], prm["lr"], prm["rows_per_iter"], gen)
                C, B = C.cpu(), B.cpu()
                tensors[f"{name}.C"], tensors[f"{name}.B"] = C.contiguous(), B.contiguous()
                lg["orth_err"] = max(float((C.T @ C - torch.eye(C.shape[0])).abs().max()),
                                     float((B.T @ B - torch.eye(B.shape[0])).abs().max()))
                log[name] = lg
            with atomic_path(args.out) as tmp:
                save_file(tensors, str(tmp))
            write_json(args.log, log)
            st.metrics["mean_loss_first"] = sum(v["loss_first"] for v in log.values()) / len(log)
            st.metrics["mean_loss_last"] = sum(v["loss_last"] for v in log.values()) / len(log)
            st.metrics["max_orth_err"] = max(v["orth_err"] for v in log.values())
            st.metrics["n_learned_kept"] = sum(v["learned_kept"] for v in log.values())
            st.metrics["n_linears"] = len(log)

    return run


def load_kotms(path):
    from safetensors.torch import load_file

    t = load_file(str(path))
    names = {k.rsplit(".", 1)[0] for k in t}
    return {n: (t[f"{n}.C"], t[f"{n}.B"]) for n in names}


@study.stage("sens", "ILA-AMP sensitivity sweep (delta, kappa) on validation windows, rotated FP model")
def _sens(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--model", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--kotms", required=True)
    p.add_argument("--out", required=True)

    def run(args):
        from paperflow.core.io import Stage, write_json
        from paperflow.quantization.data import load_tokens, windows
        from paperflow.quantization.ilaamp import sensitivity_sweep
        from paperflow.quantization.plan import sens_params
        from paperflow.quantization.qmodel import job_device, load_fp_model, wrap_linears

        _threads()
        prm = job_params(args, NAME, sens_params)
        model = load_fp_model(args.model, job_device())
        rot = load_kotms(args.kotms)
        for name, lin in wrap_linears(model).items():
            lin.set_rotation(*rot[name])  # moves C, B to the model's device
        win = windows(load_tokens(args.tokens), prm["data"], "sens")
        with Stage("quantization.sens", config=prm, outputs=[args.out], inputs=[args.model, args.tokens, args.kotms]) as st:
            sens = sensitivity_sweep(model, win, prm["ilaamp"]["bits"], prm["ilaamp"]["base_bits"], prm["clip"],
                                     prm["data"]["batch"])
            sens["split"] = "valid"
            sens["tokens"] = int(win.numel())
            write_json(args.out, sens)
            st.metrics.update(nll0=sens["nll0"], n_evals=sens["n_evals"])

    return run


@study.stage("weights", "quantize the weights with one method and write the packed model dir")
def _weights(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--kotms", default=None)
    p.add_argument("--out", required=True)

    def run(args):
        import json

        from paperflow.core.io import Stage, atomic_path
        from paperflow.core.seeding import seed_everything
        from paperflow.quantization.data import load_tokens, windows
        from paperflow.quantization.evaluate import mean_nll
        from paperflow.quantization.methods import METHODS, MethodContext
        from paperflow.quantization.plan import weights_params
        from paperflow.quantization.qmodel import job_device, load_fp_model, wrap_linears
        from paperflow.quantization.store import load_quantized, save_quantized

        _threads()
        prm = job_params(args, NAME, lambda q: weights_params(q, args.method, args.seed))
        seed_everything(prm["seed"])
        tokens = load_tokens(args.tokens)
        dev = job_device()
        model = load_fp_model(args.model, dev)
        wrap_linears(model)
        ctx = MethodContext(options=prm["options"], params=prm, seed=prm["seed"],
                            calib=windows(tokens, prm["data"], "calib", prm["seed"]),
                            kotms=load_kotms(args.kotms) if args.kotms else None)
        inputs = [args.model, args.tokens] + ([args.kotms] if args.kotms else [])
        with Stage("quantization.weights", config=prm, outputs=[args.out], inputs=inputs, seed=prm["seed"]) as st:
            records = METHODS[prm["options"]["quantizer"]](model, ctx)
            check = windows(tokens, prm["data"], "check")
            nll_fake = mean_nll(model, check, prm["batch"])
            with atomic_path(args.out) as tmp:
                mem = save_quantized(tmp, model, records, args.model, args.method)
                (tmp / "quantize_log.json").write_text(json.dumps(ctx.log, indent=1, sort_keys=True) + "\n")
                # free the fake-quant model before loading the packed one next to it (on a GPU: two
                # fp32 copies of the model otherwise); nll_fake is already computed
                del model, records
                reloaded, _ = load_quantized(tmp, device=dev)
                nll_packed = mean_nll(reloaded, check, prm["batch"])
            if nll_packed != nll_fake:
                raise RuntimeError(f"packed model NLL {nll_packed!r} != fake-quant NLL {nll_fake!r}")
            st.metrics.update(val_check_nll_fake=nll_fake, val_check_nll_packed=nll_packed,
                              bpw_linear=mem["bpw_linear"], bpw_model_other_fp16=mem["bpw_model_other_fp16"])
            ter = ctx.log.get("ternarize")
            if ter:
                st.metrics["err_stage1_sum"] = sum(v["err_stage1"] for v in ter.values())
                st.metrics["err_stage2_sum"] = sum(v["err_stage2"] for v in ter.values())

    return run


def _load_for(method: str, model: str, qdir: str | None):
    """The packed (or FP) model on the job's device."""
    from paperflow.quantization.qmodel import job_device
    from paperflow.quantization.store import fp_model_wrapped, load_quantized

    dev = job_device()
    if qdir:
        return load_quantized(qdir, device=dev)[0]
    return fp_model_wrapped(model, dev)


@study.stage("lac", "LAC: per-linear activation clip per bit-width on train windows")
def _lac(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--qdir", default=None, help="packed model dir (omit for the FP model)")
    p.add_argument("--tokens", required=True)
    p.add_argument("--out", required=True)

    def run(args):
        from paperflow.core.io import Stage, write_json
        from paperflow.quantization.data import load_tokens, windows
        from paperflow.quantization.lac import calibrate_clips
        from paperflow.quantization.plan import lac_params

        _threads()
        prm = job_params(args, NAME, lambda q: lac_params(q, args.seed))
        model = _load_for(args.method, args.model, args.qdir)
        win = windows(load_tokens(args.tokens), prm["data"], "lac", prm["seed"])
        inputs = [args.tokens] + ([args.qdir] if args.qdir else [args.model])
        with Stage("quantization.lac", config=prm, outputs=[args.out], inputs=inputs, seed=prm["seed"]) as st:
            clips = calibrate_clips(model, win, prm["bits"], prm["grid"], prm["data"]["batch"])
            write_json(args.out, clips)
            for b in prm["bits"]:
                st.metrics[f"mean_clip_a{b}"] = sum(c[b] for c in clips.values()) / len(clips)

    return run


@study.stage("eval", "test perplexity of one (method, activation setting); MP bits chosen from sens.json")
def _eval(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--method", required=True)
    p.add_argument("--act", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--qdir", default=None)
    p.add_argument("--tokens", required=True)
    p.add_argument("--lac", default=None)
    p.add_argument("--sens", default=None)
    p.add_argument("--out", required=True)

    def run(args):
        import json

        from paperflow.core.io import Stage, read_json, write_json
        from paperflow.quantization.data import load_tokens, windows
        from paperflow.quantization.evaluate import perplexity
        from paperflow.quantization.ilaamp import chain_dp, tables
        from paperflow.quantization.plan import MP_ACTS, eval_params
        from paperflow.quantization.qmodel import set_activation_bits

        _threads()
        prm = job_params(args, NAME, lambda q: eval_params(q, args.method, args.act))
        model = _load_for(args.method, args.model, args.qdir)
        L = len(model.model.layers)
        act = prm["act"]
        clips = None
        if args.lac:
            clips = {n: {int(b): v for b, v in c.items()} for n, c in read_json(args.lac).items()}
        result = {"method": prm["method"], "act": act}
        if act in MP_ACTS:
            sens = read_json(args.sens)
            d, k, bits = tables(sens)
            ip = prm["ilaamp"]
            budget = int(round(ip["avg_bits"] * L))
            bb, obj = chain_dp(d, k, bits, budget, ip["beta"])
            result.update(block_bits=bb, dp_objective=obj, budget=budget, budget_used=sum(bb), avg_bits=sum(bb) / L)
        else:
            b = {"a16": 16, "a8": 8, "a4": 4, "a4lac": 4}[act]
            bb = [b] * L
            result.update(block_bits=bb, avg_bits=float(b))
        set_activation_bits(model, bb, clips=clips if act in ("a4lac", *MP_ACTS) else None, default_clip=prm["clip"])
        tokens = load_tokens(args.tokens)
        test = windows(tokens, prm["data"], "test")
        inputs = [x for x in (args.qdir or args.model, args.tokens, args.lac, args.sens) if x]
        with Stage("quantization.eval", config=prm, outputs=[args.out], inputs=inputs) as st:
            result["test"] = perplexity(model, test, prm["data"]["batch"])
            result["split"] = "test"
            zs = prm.get("zeroshot")
            if zs:  # paper scale only (optional dependency lm-eval)
                from transformers import AutoTokenizer

                from paperflow.quantization.zeroshot import EVALUATORS

                tok = AutoTokenizer.from_pretrained(args.qdir or args.model)
                result["zeroshot"] = EVALUATORS[zs["evaluator"]](model, tok, zs["tasks"], zs["batch_size"], zs["limit"])
                st.metrics["zeroshot_avg"] = result["zeroshot"]["avg"]
            if args.qdir:
                result["memory"] = json.loads(open(f"{args.qdir}/memory.json").read())
            write_json(args.out, result)
            st.metrics.update(test_ppl=result["test"]["ppl"], avg_bits=result["avg_bits"])

    return run


@study.stage("report", "metrics.json, perplexity figure and summary.md from the eval outputs")
def _report(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--results", required=True, help="results/quantization directory")
    p.add_argument("--evals", nargs="+", required=True)
    p.add_argument("--sens", default=None)
    p.add_argument("--kotms-log", default=None)
    p.add_argument("--cross", default=None, help="unlearning_leak.json of the cross-study")

    def run(args):
        from paperflow.quantization.plan import report_params
        from paperflow.quantization.report import build_report

        prm = job_params(args, NAME, report_params)
        build_report(args.results, args.evals, prm, sens=args.sens, kotms_log=args.kotms_log, cross=args.cross)

    return run


@study.stage("ul-quantize", "cross-study: weight-only RTN quantization of an unlearning checkpoint (dense export)")
def _ul_quantize(p: argparse.ArgumentParser):
    p.add_argument("--model", required=True, help="unlearning save_pretrained dir")
    p.add_argument("--original", required=True, help="the original (full) model dir, for bin agreement")
    p.add_argument("--scheme", required=True)
    p.add_argument("--out", required=True)

    def run(args):
        from paperflow.core.io import Stage, atomic_path
        from paperflow.quantization.cross_unlearning import quantize_checkpoint

        _threads()
        cfg = {"scheme": args.scheme}
        with Stage("quantization.ul_quantize", config=cfg, outputs=[args.out], inputs=[args.model, args.original]) as st:
            with atomic_path(args.out) as tmp:
                st.metrics.update(quantize_checkpoint(args.model, args.original, args.scheme, tmp))

    return run


@study.stage("ul-report", "cross-study: leak@k before/after quantization table and figure")
def _ul_report(p: argparse.ArgumentParser):
    p.add_argument("--params", required=True, help='{"decoder": ..., "judge": ...}')
    p.add_argument("--before", nargs="+", required=True, help="MODEL=metrics.json (unlearning pipeline)")
    p.add_argument("--after", nargs="+", required=True, help="MODEL__SCHEME=metrics.json (evaluate on quantized)")
    p.add_argument("--qdirs", nargs="+", required=True, help="MODEL__SCHEME=quantized dir (manifest read)")
    p.add_argument("--out", required=True)
    p.add_argument("--figure", required=True)

    def run(args):
        import json

        from paperflow.core.io import Stage
        from paperflow.quantization.cross_unlearning import build_cross_report

        prm = json.loads(args.params)
        kv = lambda xs: dict(x.split("=", 1) for x in xs)  # noqa: E731
        before, after, qd = kv(args.before), kv(args.after), kv(args.qdirs)
        with Stage("quantization.ul_report", config=prm, outputs=[args.out, args.figure],
                   inputs=list(before.values()) + list(after.values())) as st:
            out = build_cross_report(args.out, args.figure, before, after, qd, prm["decoder"], prm["judge"])
            st.metrics["rows"] = out["rows"]

    return run
