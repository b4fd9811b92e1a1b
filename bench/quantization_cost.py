"""CPU-time cost of the quantization stages on SmolLM2-135M shapes (run by hand).

    OMP_NUM_THREADS=1 python bench/quantization_cost.py --model models/smollm2-135m-instruct

Reports process CPU seconds (not wall: the dev machine is shared) for: KOTMS on each linear shape of
one decoder block, E2M-ATQ+GPTQ on each shape, and a forward pass over 1,024 tokens; then
extrapolates the default tier (config/config.yaml) to a whole-run CPU budget. Results are recorded
in src/paperflow/quantization/README.md.
"""

from __future__ import annotations

import argparse
import time

import torch


def cpu(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--kotms-iters", type=int, default=50)
    ap.add_argument("--rows", type=int, default=128)
    a = ap.parse_args()
    from paperflow.quantization.e2m import e2m_gptq
    from paperflow.quantization.kotms import learn_kotms
    from paperflow.quantization.qmodel import load_fp_model

    model = load_fp_model(a.model)
    layer = model.model.layers[0]
    L = len(model.model.layers)
    k_tot = g_tot = 0.0
    for name, lin in layer.named_modules():
        if not isinstance(lin, torch.nn.Linear):
            continue
        W = lin.weight.detach()
        tk = cpu(lambda: learn_kotms(W, a.kotms_iters, 1e-2, a.rows, torch.Generator().manual_seed(0)))
        X = torch.randn(4096, W.shape[1])
        H = (X.T @ X / 4096).double()
        tg = cpu(lambda: e2m_gptq(W, H))
        k_tot += tk
        g_tot += tg
        print(f"{name:20s} {tuple(W.shape)}  kotms {tk:6.2f} s   e2m+gptq {tg:6.2f} s")
    ids = torch.randint(0, model.config.vocab_size, (8, 128))
    with torch.no_grad():
        tf = cpu(lambda: model(ids, use_cache=False))
    print(f"per block: kotms {k_tot:.1f} s, e2m+gptq {g_tot:.1f} s; forward 1,024 tokens {tf:.1f} s")
    sweep = 1 + 3 * L + 9 * (L - 1)
    est = {"kotms": k_tot * L, "ternarize (1 run)": g_tot * L + 4 * 2.5 * tf,
           "sens sweep (2x128 tokens, half-model average)": sweep * tf / 4 * 0.6,
           "one eval (32x128 tokens)": 4 * tf}
    for k, v in est.items():
        print(f"estimate {k}: {v / 60:.1f} CPU-min")


if __name__ == "__main__":
    main()
