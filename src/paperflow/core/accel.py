"""Distributed training through accelerate: one code path for 1 CPU process, N CPU processes
(torch.distributed over gloo) and N GPUs (NCCL, bf16).

Training code builds its `Accelerator` with `make_accelerator()` (or `Accelerator(cpu=not
torch.cuda.is_available())`; without `cpu=True` accelerate would not start gloo on a CPU-only
machine and every process would train alone). Rules start a training stage through

    python -m paperflow.core.accel launch --procs {resources.gpu} -- paperflow <study> train ...

so the process count comes from the job's resources (one home: `<study>.resources.<stage>.gpu` in
the config; see `rules/common.smk: stage_resources`). With --procs 0 or 1 the command is exec'd
as is (no launcher start-up cost); with N > 1 it becomes `accelerate launch --multi_gpu
--num_processes N ...` (torchrun underneath; on a CPU-only node the processes talk over gloo).

`python -m paperflow.core.accel probe ...` is a small, real training stage (an MLP classifier on a
seeded synthetic task, data-parallel with split batches) whose metrics do not depend on the
number of processes. Tests use it to check the distributed path, and on a new cluster it is a
quick self-test of the GPU/NCCL setup:

    srun --gpus=2 python -m paperflow.core.accel launch --procs 2 -- \\
        python -m paperflow.core.accel probe --out /tmp/probe.safetensors
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(torch.cuda.is_available())


def make_accelerator(**kwargs: Any) -> Any:
    """An Accelerator on CUDA (bf16 unless told otherwise) or on CPU (gloo when launched with N>1)."""
    from accelerate import Accelerator

    cuda = cuda_available()
    kwargs.setdefault("cpu", not cuda)
    kwargs.setdefault("mixed_precision", "bf16" if cuda else "no")
    return Accelerator(**kwargs)


def free_port() -> int:
    """A free TCP port for the rendezvous (several jobs may share a node)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _script_argv(cmd: Sequence[str]) -> list[str]:
    """accelerate launch wants a python script (or -m module): resolve console scripts on PATH."""
    cmd = list(cmd)
    if not cmd:
        raise ValueError("no command to launch")
    if cmd[0] in ("python", "python3", Path(sys.executable).name) or cmd[0] == sys.executable:
        rest = cmd[1:]
        if rest[:1] == ["-m"]:
            return ["-m", *rest[1:]]
        return rest
    exe = shutil.which(cmd[0]) or cmd[0]
    return [exe, *cmd[1:]]


def launch_argv(procs: int, cmd: Sequence[str], port: int | None = None, mixed_precision: str | None = None) -> list[str]:
    """The argv that runs `cmd` on `procs` processes (the command itself when procs <= 1)."""
    procs = int(procs or 0)
    if procs <= 1:
        return list(cmd)
    script = _script_argv(cmd)
    mp = mixed_precision or ("bf16" if cuda_available() else "no")
    argv = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(procs),
            "--num_machines", "1", "--mixed_precision", mp, "--dynamo_backend", "no",
            "--main_process_port", str(port or free_port())]
    if script[0] == "-m":
        argv += ["-m", *script[1:]]
    else:
        argv += script
    return argv


def launch(procs: int, cmd: Sequence[str], mixed_precision: str | None = None) -> int:
    argv = launch_argv(procs, cmd, mixed_precision=mixed_precision)
    print(f"[paperflow.accel] {' '.join(argv)}", file=sys.stderr, flush=True)
    os.execvp(argv[0], argv)
    return 127  # pragma: no cover


# ---------------------------------------------------------------------------------------------------
# probe: a small real training stage (data-parallel, split batches -> same updates for any N)
# ---------------------------------------------------------------------------------------------------
def _probe_data(seed: int, n: int, d: int, k: int) -> tuple[Any, Any]:
    import numpy as np

    from paperflow.core.seeding import stream

    rng = stream(seed, "accel.probe.data")
    centers = rng.normal(0, 1.5, size=(k, d))
    y = rng.integers(0, k, size=n)
    x = centers[y] + rng.normal(0, 1.0, size=(n, d))
    return x.astype("float32"), y.astype("int64")


def train_probe(out: str | Path, seed: int = 0, n_train: int = 2048, n_test: int = 1024, dim: int = 16,
                classes: int = 4, hidden: int = 32, epochs: int = 3, batch_size: int = 64, lr: float = 0.05) -> dict[str, Any] | None:
    """Train the probe MLP; the main process writes `out` (safetensors) + manifest; returns metrics there."""
    import numpy as np
    import torch
    from accelerate.utils import DataLoaderConfiguration
    from safetensors.torch import save_file

    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.seeding import seed_everything

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    acc = make_accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True, even_batches=True))
    if batch_size % acc.num_processes or n_train % batch_size:
        raise ValueError(f"batch_size {batch_size} must divide n_train {n_train} and be divisible by "
                         f"the {acc.num_processes} processes")
    x, y = _probe_data(seed, n_train + n_test, dim, classes)
    xt, yt = torch.from_numpy(x[:n_train]), torch.from_numpy(y[:n_train])
    xe, ye = torch.from_numpy(x[n_train:]), torch.from_numpy(y[n_train:])

    seed_everything(seed)
    net = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, classes))
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt), batch_size=batch_size,
                                         shuffle=True, drop_last=True, generator=gen)
    net, opt, loader = acc.prepare(net, opt, loader)
    losses = []
    for _ in range(epochs):
        net.train()
        tot, nb = torch.zeros((), device=acc.device), 0
        for xb, yb in loader:
            loss = torch.nn.functional.cross_entropy(net(xb), yb)
            opt.zero_grad(set_to_none=True)
            acc.backward(loss)
            opt.step()
            tot += loss.detach().float()
            nb += 1
        losses.append(float(acc.reduce(tot, reduction="mean")) / max(nb, 1))
    raw = acc.unwrap_model(net)
    raw.eval()
    with torch.no_grad():
        logits = raw(xe.to(acc.device)).float()
        test_loss = float(torch.nn.functional.cross_entropy(logits, ye.to(acc.device)))
        test_acc = float((logits.argmax(1).cpu() == ye).float().mean())
    acc.wait_for_everyone()
    if not acc.is_main_process:
        return None
    metrics = {"train_loss": losses, "test_loss": test_loss, "test_acc": test_acc,
               "num_processes": acc.num_processes, "distributed_type": str(acc.distributed_type),
               "backend": str(acc.state.backend), "device": str(acc.device)}
    cfg = {"seed": seed, "n_train": n_train, "n_test": n_test, "dim": dim, "classes": classes, "hidden": hidden,
           "epochs": epochs, "batch_size": batch_size, "lr": lr}
    with Stage("core.accel.probe", config=cfg, outputs=[out], seed=seed) as st:
        with atomic_path(out) as tmp:
            save_file({k: v.detach().cpu().contiguous() for k, v in raw.state_dict().items()}, str(tmp),
                      metadata={"num_processes": str(acc.num_processes)})
        st.metrics.update(metrics)
    return metrics


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m paperflow.core.accel", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    pl = sub.add_parser("launch", help="run COMMAND on --procs processes through accelerate launch")
    pl.add_argument("--procs", type=int, default=1, help="processes (the job's GPUs; 0/1: run COMMAND directly)")
    pl.add_argument("--mixed-precision", default=None, help="default: bf16 on CUDA, no on CPU")
    pl.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    pp = sub.add_parser("probe", help="train the probe MLP (a real data-parallel training stage)")
    pp.add_argument("--out", required=True, help="checkpoint (.safetensors); metrics in its manifest")
    for name, typ, default in (("seed", int, 0), ("n-train", int, 2048), ("n-test", int, 1024), ("dim", int, 16),
                               ("classes", int, 4), ("hidden", int, 32), ("epochs", int, 3),
                               ("batch-size", int, 64), ("lr", float, 0.05)):
        pp.add_argument(f"--{name}", type=typ, default=default)
    a = p.parse_args(argv)
    if a.action == "launch":
        cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
        if not cmd:
            p.error("launch: give the command after --")
        return launch(a.procs, cmd, a.mixed_precision)
    kw = {k: v for k, v in vars(a).items() if k not in ("action", "out")}
    train_probe(a.out, **kw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
