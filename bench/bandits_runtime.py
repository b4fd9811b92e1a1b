"""Benchmark (run by hand): BLCE against the static-grid design baselines its runtime claim is about.

    OMP_NUM_THREADS=1 python bench/bandits_runtime.py [--cells 1000x5,50x20] [--contexts sphere,anisotropic]
                                                     [--T 10000] [--seeds 3] [--beta 1.0]

Per (K, d) cell and context distribution, runs blce, batch_elim_dg (distributional G-optimal design,
Ruan et al. simplified), batch_elim_g (per-round near-G-optimal design) and linucb side by side:
for each seed every algorithm runs once, one after the other, so machine load hits them alike. Times
only the policies' decision + update work (`runtime_s`: context generation and rewards excluded).
Reports per-round time (mean ± s.e. over seeds), each baseline's time / blce's time paired by seed
(mean with a 95% t CI, core.stats), final regret, and batch_elim_dg's design fits (time per fit, share
of its policy time, Frank–Wolfe iterations) and batch_elim_g's design iterations per round.
Results are recorded in src/paperflow/bandits/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from paperflow.bandits.simulate import run_one
from paperflow.core.stats import mean_se, t_ci

ALGOS = ("blce", "batch_elim_dg", "batch_elim_g", "linucb")


def _ms(x: list[float], scale: float = 1e6, digits: int = 0) -> str:
    m, se = mean_se(x)
    return f"{scale * m:.{digits}f}" + (f" ± {scale * se:.{digits}f}" if se is not None else "")


def fit_timing(a: argparse.Namespace) -> None:
    """One full distributional-design fit (product Frank–Wolfe + softmax policy) on N = ⌈2d² ln d⌉ context
    sets of K arms, as batch_elim_dg does at each grid point (here on the full arm sets)."""
    import math

    from paperflow.bandits.design import distributional_g_optimal, fit_softmax_policy
    from paperflow.bandits.envs import ContextualEnv

    print("| K | d | contexts | N sets | ε | FW iterations | E max‖x‖²_{Λ⁻¹} (opt = d) | fit time (s), mean ± s.e. |")
    print("|---|---|---|---|---|---|---|---|")
    for cell in a.cells.split(","):
        K, d = map(int, cell.lower().split("x"))
        N = max(4 * d, math.ceil(2 * d * d * math.log(max(d, 2))))
        for ctx in a.contexts.split(","):
            for eps in (0.1, 0.01):
                times, its, gs = [], [], []
                for s in range(a.seeds):
                    env = ContextualEnv(K=K, d=d, seed=s, context=ctx, aniso_ratio=a.aniso_ratio)
                    sets = [np.array(env.round(t)[0]) for t in range(1, N + 1)]
                    t0 = time.perf_counter()
                    des = fit_softmax_policy(sets, distributional_g_optimal(sets, eps=eps, max_iter=500))
                    times.append(time.perf_counter() - t0)
                    its.append(des.iters)
                    gs.append(des.g)
                print(f"| {K} | {d} | {ctx} | {N} | {eps:g} | {np.mean(its):.0f} | {np.mean(gs):.2f} | {_ms(times, 1.0, 3)} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", default="1000x5,50x20", help="comma-separated KxD cells")
    ap.add_argument("--contexts", default="sphere,anisotropic")
    ap.add_argument("--aniso-ratio", type=float, default=10.0)
    ap.add_argument("--T", type=int, default=10000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--fit-only", action="store_true",
                    help="only time single distributional-design fits (N = ⌈2d² ln d⌉ context sets, ε = 0.1 and 0.01)")
    a = ap.parse_args()
    if a.fit_only:
        fit_timing(a)
        return
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# T={a.T} β={a.beta} seeds={a.seeds}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average at start {load:.1f}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    t_start = time.time()
    for cell in a.cells.split(","):
        K, d = map(int, cell.lower().split("x"))
        for ctx in a.contexts.split(","):
            env = {"context": ctx} if ctx != "anisotropic" else {"context": ctx, "aniso_ratio": a.aniso_ratio}
            res: dict[str, list] = {k: [] for k in ALGOS}
            for s in range(a.seeds):
                for algo in ALGOS:
                    res[algo].append(run_one({"K": K, "d": d}, algo, {"beta": a.beta}, a.T, s, dict(env)))
            t = {k: [r.runtime_s / a.T for r in v] for k, v in res.items()}
            print(f"\n## K={K}, d={d}, contexts={ctx}" + (f" (ratio {a.aniso_ratio:g})" if ctx == "anisotropic" else "")
                  + f", T={a.T}, {a.seeds} seeds")
            print("| algorithm | µs / round | time / blce's (95% t CI) | final regret | design |")
            print("|---|---|---|---|---|")
            for k in ALGOS:
                ratio = t_ci([x / y for x, y in zip(t[k], t["blce"])])
                rs = (f"{ratio.value:.2f} [{ratio.lo:.2f}, {ratio.hi:.2f}]" if ratio.has_ci else f"{ratio.value:.2f}")
                st = [r.stats for r in res[k]]
                if k == "batch_elim_dg":
                    fit = [x["design_fit_s"] for x in st]
                    share = [x["design_fit_s"] / r.runtime_s for x, r in zip(st, res[k])]
                    des = (f"{np.mean([x['design_fits'] for x in st]):.0f} fits, {_ms([f / x['design_fits'] for f, x in zip(fit, st)], 1e3, 1)} ms/fit, "
                           f"fit share {np.mean(share):.2f}, FW its {np.mean([x['fw_iters'] for x in st]):.0f}, "
                           f"E max‖x‖² {np.mean([x['dist_g'] for x in st]):.2f} (d={d}), η {np.mean([x['eta'] for x in st]):.2g}")
                elif k == "batch_elim_g":
                    des = f"{np.mean([x['design_iters'] for x in st]) / a.T:.2f} FW its/round"
                else:
                    des = ""
                print(f"| {k} | {_ms(t[k])} | {rs} | {_ms([r.final_regret for r in res[k]], 1.0)} | {des} |")
    print(f"\n# wall {time.time() - t_start:.0f} s; load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
