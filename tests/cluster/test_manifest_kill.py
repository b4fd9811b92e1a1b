"""An output and its `*.manifest.json` stay one unit when a job is killed (SIGTERM or SIGKILL) and rerun.

Snakemake deletes a killed job's declared outputs, but the manifest beside an output is not a declared
output. `paperflow.core.io.Stage` therefore deletes an output's old manifest before the stage writes
anything, records the output's digest and size in the new manifest, and `read_manifest` checks them.
The workflow test runs a tiny Snakefile whose job uses `Stage` exactly as the studies do and is killed
after it wrote its new output but before its manifest: at every point, every manifest on disk must
describe the output beside it, and after the rerun every output has a manifest with the new parameter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paperflow.core.io import (
    Stage,
    StaleManifestError,
    file_digest,
    manifest_path,
    read_manifest,
    verify_manifest,
    write_json,
)
from tests.cluster.conftest import REPO, env

STAGE_PY = """
import os, sys, time
from pathlib import Path
from paperflow.core.io import Stage, write_json
out, v, i = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Stage("toy.make", config={"v": v}, outputs=[out]):
    write_json(out, {"v": v, "i": i})
    hang = os.environ.get("HANG_CELL")
    if hang == i:  # killed here: new output written, manifest not yet
        Path(os.environ["HANG_MARKER"]).write_text("written")
        time.sleep(120)
"""

SNAKEFILE = """
rule all:
    input: expand("out/{i}.json", i=range(2))

rule make:
    output: "out/{i}.json"
    params: v=config["value"]
    shell: "{python} stage.py {output} {params.v} {wildcards.i}"
"""


def _consistent(work: Path) -> list[str]:
    """Problems: manifests that do not describe the output beside them."""
    bad = []
    for m in sorted((work / "out").glob("*.manifest.json")):
        out = Path(str(m)[: -len(".manifest.json")])
        try:
            verify_manifest(out, json.loads(m.read_text()), digest=True)
        except StaleManifestError as e:
            bad.append(str(e))
    return bad


def _smk(work: Path, v: int, **extra_env: str) -> subprocess.Popen:
    e = env(PYTHONPATH=str(REPO / "src"), **extra_env)
    return subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", f"--config=value={v}",
                             "--rerun-triggers", "params", "--rerun-incomplete", "--nolock", "--workflow-profile", "none"],
                            cwd=work, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _kill_when_written(work: Path, v: int, sig: int) -> None:
    marker = work / "marker"
    marker.unlink(missing_ok=True)
    p = _smk(work, v, HANG_CELL="1", HANG_MARKER=str(marker))
    t0 = time.time()
    while not marker.exists():
        assert p.poll() is None, p.stdout.read()
        assert time.time() - t0 < 120, "the job never reached its kill point"
        time.sleep(0.1)
    # the new output is on disk, its manifest is not yet
    assert json.loads((work / "out" / "1.json").read_text())["v"] == v
    os.killpg(p.pid, sig)
    p.communicate(timeout=60)


def test_kill_then_rerun_keeps_every_manifest_matching_its_output(tmp_path: Path):
    work = tmp_path / "wf"
    work.mkdir()
    (work / "stage.py").write_text(STAGE_PY)
    (work / "Snakefile").write_text(SNAKEFILE.replace("{python}", sys.executable))

    p = _smk(work, 1)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    assert len(list((work / "out").glob("*.manifest.json"))) == 2 and not _consistent(work)

    for sig in (signal.SIGTERM, signal.SIGKILL):  # v=2 reruns every job (params); cell 1 is killed
        _kill_when_written(work, 2, sig)
        assert not _consistent(work), (signal.Signals(sig).name, _consistent(work))
        # the killed cell's old (v=1) manifest is gone, whatever happened to its output
        assert not manifest_path(work / "out" / "1.json").exists()

    p = _smk(work, 2)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    assert not _consistent(work)
    for i in range(2):
        man = read_manifest(work / "out" / f"{i}.json")
        assert man["config"] == {"v": 2} and man["output_sha256"] == file_digest(work / "out" / f"{i}.json")


def test_stage_removes_stale_manifest_before_running(tmp_path: Path):
    out = tmp_path / "o.json"
    with Stage("t", config={"v": 1}, outputs=[out]):
        write_json(out, {"v": 1})
    assert read_manifest(out)["config"] == {"v": 1}
    with pytest.raises(RuntimeError), Stage("t", config={"v": 2}, outputs=[out]):
        write_json(out, {"v": 2})  # new output, then the stage fails before its manifest
        raise RuntimeError("killed")
    assert not manifest_path(out).exists()


def test_read_manifest_rejects_a_changed_or_missing_output(tmp_path: Path):
    out = tmp_path / "d"
    with Stage("t", config={}, outputs=[out]):
        out.mkdir()
        (out / "a.bin").write_bytes(b"12345")
    assert read_manifest(out)["output_files"] == 1
    (out / "a.bin").write_bytes(b"54321")  # same size, other bytes: the digest catches it
    with pytest.raises(StaleManifestError, match="sha256"):
        read_manifest(out)
    (out / "b.bin").write_bytes(b"x")
    with pytest.raises(StaleManifestError, match="size"):
        read_manifest(out)
    m = read_manifest(out, verify=False)
    for f in out.iterdir():
        f.unlink()
    out.rmdir()
    with pytest.raises(StaleManifestError, match="missing"):
        verify_manifest(out, m)
