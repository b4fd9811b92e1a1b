"""paperflow.core.runprofile: job durations, the job graph and the two wall-time bounds from a Snakemake log."""

from __future__ import annotations

import pytest

from paperflow.core.runprofile import critical_path, parse_log, summarize, to_markdown

# The shape of Snakemake 9's default log: `[timestamp]`, a rule block (or `Job N: message` + `Reason:`),
# and `Finished jobid: N (Rule: NAME)` after a timestamp.
LOG = """\
Building DAG of jobs...
Execute 2 jobs...

[Sun Dec  6 18:00:00 2026]
localrule data:
    output: data/x
    log: logs/data.log
    jobid: 3
    reason: Missing output files: data/x
    resources: tmpdir=/tmp
[Sun Dec  6 18:00:00 2026]
localrule model:
    output: models/m
    jobid: 4
    reason: Missing output files: models/m
[Sun Dec  6 18:00:10 2026]
Finished jobid: 3 (Rule: data)
1 of 6 steps (17%) done
[Sun Dec  6 18:00:10 2026]
localrule train:
    input: data/x, models/m/config.json
    output: models/t
    jobid: 5
    reason: Missing output files: models/t; Input files updated by another job: data/x
    wildcards: seed=0
[Sun Dec  6 18:00:30 2026]
Finished jobid: 4 (Rule: model)
2 of 6 steps (33%) done
[Sun Dec  6 18:00:30 2026]
localrule side:
    input: data/x
    output: results/side.json
    jobid: 6
    wildcards: seed=1
[Sun Dec  6 18:00:35 2026]
Finished jobid: 6 (Rule: side)
[Sun Dec  6 18:01:00 2026]
Finished jobid: 5 (Rule: train)
[Sun Dec  6 18:01:00 2026]
Job 1: paperflow: writing the report
Reason: Missing output files: results/r.md; Input files updated by another job: models/t, results/side.json
[Sun Dec  6 18:01:02 2026]
Finished jobid: 1 (Rule: report)
[Sun Dec  6 18:01:02 2026]
localrule broken:
    input: results/r.md
    output: results/never
    jobid: 7
"""


def _jobs():
    return parse_log(LOG.splitlines(keepends=True))


def test_durations_rules_and_unfinished_jobs():
    jobs = _jobs()
    assert {j: (jobs[j].rule, jobs[j].end is not None) for j in jobs} == {
        3: ("data", True), 4: ("model", True), 5: ("train", True), 6: ("side", True), 1: ("report", True),
        7: ("broken", False)}
    assert [jobs[j].seconds for j in (3, 4, 5, 6, 1)] == [10, 30, 50, 5, 2]
    assert jobs[5].label == "train[seed=0]"
    with pytest.raises(ValueError, match="never finished"):
        _ = jobs[7].seconds


def test_edges_from_inputs_inside_output_directories_and_from_a_message_jobs_reason():
    jobs = _jobs()
    assert jobs[5].preds == [3, 4]  # data/x directly, models/m/config.json inside the directory models/m
    assert jobs[6].preds == [3]
    assert jobs[1].preds == [5, 6]  # only the reason line names a message job's inputs
    assert jobs[3].preds == [] and jobs[4].preds == []


def test_critical_path_is_the_longest_dependent_chain_not_the_longest_jobs():
    secs, chain = critical_path(_jobs())
    # model 30 -> train 50 -> report 2 = 82 (data 10 -> train is shorter; side is off the path)
    assert secs == 82
    assert [j.rule for j in chain] == ["model", "train", "report"]


def test_bounds_say_which_one_binds():
    s = summarize(_jobs(), cores=2)
    assert s["job_seconds"] == 97 and s["work_bound_s"] == 48.5
    assert s["critical_path_s"] == 82 and s["bound_by"] == "critical path"
    assert s["makespan_s"] == 62 and s["jobs_finished"] == 5 and s["jobs_unfinished"] == [7]
    assert list(s["per_rule"])[0] == "train"
    # with one core the same jobs are bound by their total work
    assert summarize(_jobs(), cores=1)["bound_by"] == "total work"
    md = to_markdown(s)
    assert "bound by critical path" in md and "model[" not in md and "train[seed=0] 50 s" in md


def test_errors():
    with pytest.raises(ValueError, match="no finished job"):
        summarize(parse_log(["[Sun Dec  6 18:00:00 2026]\n", "localrule a:\n", "    jobid: 1\n"]), 2)
    with pytest.raises(ValueError, match="cores"):
        summarize(_jobs(), 0)
    with pytest.raises(ValueError, match="not a Snakemake log"):
        parse_log(["localrule a:\n"])
