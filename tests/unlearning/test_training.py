"""Training loops resume from `core.checkpoint`: stopped after N steps (or rounds) and rerun, they end with
exactly the weights of an uninterrupted run (torch.equal, CPU)."""
import copy

import torch

from paperflow.core.checkpoint import has_checkpoint
from paperflow.core.seeding import stream
from paperflow.unlearning.methods import build_method
from paperflow.unlearning.train import encode_rows, finetune, frozen_copy, unlearn_steps


def _fresh(model):
    m = copy.deepcopy(model)
    for q in m.parameters():
        q.requires_grad_(True)
    return m


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_finetune_resumes_to_the_same_weights(tiny_lm, tmp_path):
    tok, model0, rows, _ = tiny_lm
    p = {"steps": 9, "batch_size": 8, "lr": 3e-3, "weight_decay": 0.01, "checkpoint_every": 0}
    ref = _fresh(model0)
    logs_ref = finetune(ref, tok, rows, p, stream(0, "ft"))
    ck = tmp_path / "ft.ckpt"
    killed = _fresh(model0)
    assert finetune(killed, tok, rows, p, stream(0, "ft"), ckpt_dir=ck, key="job", stop_after=4) is None
    assert has_checkpoint(ck) and not list(tmp_path.rglob("*.pt"))
    resumed = _fresh(model0)  # a new process rebuilds the initial model, then resumes
    logs = finetune(resumed, tok, rows, p, stream(0, "ft"), ckpt_dir=ck, key="job")
    assert _same(resumed, ref) and logs == logs_ref
    assert not _same(killed, ref)  # the stopped run really stopped early
    # a checkpoint written for other parameters is ignored (fresh start, same result)
    again = _fresh(model0)
    assert finetune(again, tok, rows, p, stream(0, "ft"), ckpt_dir=ck, key="other") == logs_ref
    assert _same(again, ref)


def test_unlearn_steps_resume_to_the_same_weights(tiny_lm, tmp_path):
    tok, model0, rows, _ = tiny_lm
    forget, retain = encode_rows(tok, rows[-8:]), encode_rows(tok, rows[:-8])
    p = {"lr": 1e-3, "batch_forget": 4, "batch_retain": 4, "check_every": 3, "checkpoint_every": 3}

    def run(stop_after=None, ck=None):
        m = _fresh(model0)
        meth = build_method({"loss": "npo", "beta": 1.0, "alpha": 1.0}, frozen_copy(model0))
        check = lambda step: (False, {"check": step})  # noqa: E731
        return m, unlearn_steps(m, tok, meth, forget, retain, p, stream(1, "ul"), 8, check, ckpt_dir=ck,
                                key="job", stop_after=stop_after)

    ref, (logs_ref, done_ref) = run()
    killed, out = run(stop_after=5, ck=tmp_path / "ul.ckpt")
    assert out is None and has_checkpoint(tmp_path / "ul.ckpt")
    resumed, (logs, done) = run(ck=tmp_path / "ul.ckpt")
    assert done == done_ref == 8 and logs == logs_ref and _same(resumed, ref) and not _same(killed, ref)


def test_rule_resumes_per_round_to_the_same_weights(tiny_lm, tmp_path):
    from paperflow.unlearning.rule import run_rule

    tok, model0, rows, _ = tiny_lm
    frows, rrows = rows[-8:], rows[:-8]
    p = {"lr": 1e-3, "batch_forget": 4, "batch_retain": 4, "check_every": 5, "rounds": 2, "samples_per_prompt": 2,
         "steps_per_round": 2, "weighting": "uniform", "weight_k": 4, "judge": "rouge", "judge_kw": {"gate": 0.0, "threshold": 0.0},
         "attack_decoder": {"temperature": 1.0, "top_p": 1.0, "top_k": 50}, "sample": True, "max_new_tokens": 6,
         "prompts_per_batch": 8}

    def run(stop_after=None, ck=None):
        m = _fresh(model0)
        meth = build_method({"loss": "grad_diff", "alpha": 1.0})
        saved = []
        res = run_rule(m, tok, meth, frows, encode_rows(tok, frows), encode_rows(tok, rrows), p, stream(2, "rule"), 77,
                       lambda r, mm, leaks: saved.append(r), ckpt_dir=ck, key="job", stop_after=stop_after)
        return m, res, saved

    ref, res_ref, saved_ref = run()
    assert res_ref["leaks"] and saved_ref == [1, 2]  # threshold 0: every sample "leaks" (a pool to train on)
    _, out, saved = run(stop_after=1, ck=tmp_path / "rule.ckpt")
    assert out is None and saved == [1]
    resumed, res, saved = run(ck=tmp_path / "rule.ckpt")
    assert saved == [2] and res == res_ref and _same(resumed, ref)


def test_load_tokenizer_is_shared_by_identical_copies_only(tiny_lm, tmp_path):
    import shutil

    from paperflow.unlearning.model import load_tokenizer, train_tokenizer

    tok, _, rows, d = tiny_lm
    shutil.copytree(d / "tok", tmp_path / "copy")
    assert load_tokenizer(tmp_path / "copy") is load_tokenizer(d / "tok")  # same bytes: loaded once
    train_tokenizer(["a different vocabulary entirely"], tmp_path / "other")
    other = load_tokenizer(tmp_path / "other")
    assert other is not load_tokenizer(d / "tok")
    assert other.vocab_size != tok.vocab_size
