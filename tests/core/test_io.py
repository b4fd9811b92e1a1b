from __future__ import annotations

import json

import pytest

from paperflow.core.io import Stage, atomic_path, file_digest, manifest_path, read_manifest, write_json


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    out = tmp_path / "sub" / "x.json"
    with pytest.raises(RuntimeError):
        with atomic_path(out) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not out.exists()
    assert list((tmp_path / "sub").iterdir()) == []  # no temp debris either


def test_atomic_replaces_existing_file_and_dir(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("old")
    with atomic_path(f) as tmp:
        tmp.write_text("new")
    assert f.read_text() == "new"
    d = tmp_path / "d"
    d.mkdir()
    (d / "stale").write_text("1")
    with atomic_path(d) as tmp:
        tmp.mkdir()
        (tmp / "fresh").write_text("2")
    assert [p.name for p in d.iterdir()] == ["fresh"]


def test_stage_writes_manifest(tmp_path):
    inp = tmp_path / "in.txt"
    inp.write_text("data")
    out = tmp_path / "out.json"
    with Stage("demo.stage", config={"a": 1}, outputs=[out], inputs=[inp], seed=3) as st:
        write_json(out, {"v": 1})
        st.metrics["score"] = 0.5
    m = read_manifest(out)
    assert m["stage"] == "demo.stage" and m["seed"] == 3 and m["metrics"] == {"score": 0.5}
    assert m["inputs"] == {str(inp): file_digest(inp)}
    assert m["output_sha256"] == file_digest(out)
    assert len(m["config_hash"]) == 16 and "numpy" in m["packages"] and m["wall_time_s"] >= 0
    assert m["host"]["machine"] and m["host"]["cpu"] and int(m["host"]["cpu_count"]) >= 1


def test_machine_info_reports_torch_kernels_only_when_torch_is_loaded(monkeypatch):
    import sys
    import types

    from paperflow.core.io import machine_info

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert "torch_cpu_capability" not in machine_info()
    fake = types.SimpleNamespace(backends=types.SimpleNamespace(cpu=types.SimpleNamespace(
        get_cpu_capability=lambda: "AVX512")))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert machine_info()["torch_cpu_capability"] == "AVX512"


def test_stage_failure_writes_no_manifest(tmp_path):
    out = tmp_path / "o.json"
    with pytest.raises(ValueError):
        with Stage("demo", config={}, outputs=[out]):
            raise ValueError("boom")
    assert not manifest_path(out).exists()


def test_stage_requires_its_output(tmp_path):
    with pytest.raises(FileNotFoundError):
        with Stage("demo", config={}, outputs=[tmp_path / "never.json"]):
            pass


def test_config_hash_is_order_independent(tmp_path):
    from paperflow.core.config import config_hash

    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash(json.loads('{"b": [1, 2], "a": 1}'))
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_snakemake_directory_marker_does_not_stale_a_manifest(tmp_path):
    """Snakemake adds `.snakemake_timestamp` to directory outputs after the job: the manifest still holds."""
    from paperflow.core.io import Stage, read_manifest

    out = tmp_path / "model"
    with Stage("t.dir", config={}, outputs=[out]):
        out.mkdir()
        (out / "w.bin").write_bytes(b"123")
    (out / ".snakemake_timestamp").touch()
    assert read_manifest(out)["output_files"] == 1


def test_seed_everything_sets_torch_deterministic_without_importing_inductor():
    import subprocess
    import sys

    code = ("import sys, torch; from paperflow.core.seeding import seed_everything; seed_everything(3); "
            "print(torch.are_deterministic_algorithms_enabled(), "
            "torch.is_deterministic_algorithms_warn_only_enabled(), 'torch._inductor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "False"]


def test_seed_everything_seeds_torch_imported_after_it():
    """A stage that seeds and only then imports torch (lazily, e.g. through transformers) must get the
    same weights in every process: torch seeds its default generator at random per process."""
    import subprocess
    import sys

    code = ("from paperflow.core.seeding import seed_everything; seed_everything(3); import torch; "
            "print(torch.initial_seed(), float(torch.rand(1)))")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
            for _ in range(2)]
    assert runs[0][0] == "3" and runs[0] == runs[1]


def test_seed_everything_torch_false_leaves_an_unimported_torch_alone():
    import subprocess
    import sys

    code = ("import sys; from paperflow.core.seeding import seed_everything; seed_everything(3, torch=False); "
            "print('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split() == ["False"]
