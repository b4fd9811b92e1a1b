"""Per-study progress lines of a whole run (Snakefile onstart hook + summary messages)."""

from paperflow.core.progress import format_plan, study_job_counts, study_of_rule, summary_message


def test_rule_belongs_to_the_longest_matching_study():
    studies = ["lm", "lm_extra", "hashing"]
    assert study_of_rule("hashing_train", studies) == "hashing"
    assert study_of_rule("lm_extra_eval", studies) == "lm_extra"
    assert study_of_rule("lm_convert_smollm2", studies) == "lm"
    assert study_of_rule("summary_all", studies) == "(shared)"
    assert study_of_rule("hashingx_train", studies) == "(shared)"  # a prefix must end at "_"


def test_counts_and_plan_lines():
    rules = ["hashing_train"] * 3 + ["bandits_simulate"] * 2 + ["summary_all", "all"]
    counts = study_job_counts(rules, ["bandits", "hashing", "fdiv"])
    assert counts == {"hashing": 3, "bandits": 2, "(shared)": 2}
    text = format_plan(counts, ["bandits", "hashing", "fdiv"])
    lines = text.splitlines()
    assert lines[1].split() == ["bandits", "2"]
    assert lines[2].split() == ["hashing", "3"]
    assert lines[3].split()[:2] == ["fdiv", "0"] and "up to date" in lines[3]
    assert lines[-1].split() == ["total", "7"]


def test_summary_message_names_study_and_file():
    m = summary_message("fdiv", "results/fdiv/summary.md")
    assert "fdiv" in m and "results/fdiv/summary.md" in m
