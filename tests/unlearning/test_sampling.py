"""Shared-prefix batched sampling against HF generate, and decoding filters."""
import torch

from paperflow.unlearning.model import encode_prompt
from paperflow.unlearning.sampling import GREEDY, Decoder, _choose, sample_one_at_a_time, sample_shared_prefix


def test_greedy_matches_hf_generate_with_left_padding(tiny_lm):
    tok, model, rows, _ = tiny_lm
    prompts = [encode_prompt(tok, r["question"]) for r in rows[:7]]
    assert len({len(p) for p in prompts}) > 1  # different lengths: left padding is exercised
    ours = sample_shared_prefix(model, prompts, 1, GREEDY, 12, tok.eos_token_id, tok.pad_token_id, seed=0,
                                prompts_per_batch=4)
    ref = sample_one_at_a_time(model, prompts, 1, GREEDY, 12, tok.eos_token_id, tok.pad_token_id, seed=0)
    assert ours == ref


def test_shared_prefix_samples_equal_greedy_when_top_k_is_1(tiny_lm):
    tok, model, rows, _ = tiny_lm
    prompts = [encode_prompt(tok, r["question"]) for r in rows[:3]]
    g = sample_shared_prefix(model, prompts, 1, GREEDY, 10, tok.eos_token_id, tok.pad_token_id, seed=0)
    s = sample_shared_prefix(model, prompts, 5, Decoder("k1", 1.0, 1.0, 1), 10, tok.eos_token_id,
                             tok.pad_token_id, seed=0, prompts_per_batch=2)
    for gi, si in zip(g, s):
        assert len(si) == 5 and all(x == gi[0] for x in si)


def test_in_place_cache_gives_the_concatenating_caches_samples(tiny_lm):
    """The preallocated KV cache (written in place) returns the same tokens as HF's torch.cat cache, for
    sampled and greedy decoding, prompts of different lengths and a last batch smaller than the rest."""
    tok, model, rows, _ = tiny_lm
    prompts = [encode_prompt(tok, r["question"]) for r in rows[:7]]
    for dec, n in ((Decoder("T1", 1.0, 1.0, 50), 6), (Decoder("T07", 0.7, 0.9, 20), 3), (GREEDY, 1)):
        kw = dict(seed=5, prompts_per_batch=3)
        new = sample_shared_prefix(model, prompts, n, dec, 12, tok.eos_token_id, tok.pad_token_id, **kw)
        old = sample_shared_prefix(model, prompts, n, dec, 12, tok.eos_token_id, tok.pad_token_id, preallocate=False,
                                   **kw)
        assert new == old and sum(len(c) for r in new for c in r) > 0


def test_samples_are_seeded_and_diverse(tiny_lm):
    tok, model, rows, _ = tiny_lm
    prompts = [encode_prompt(tok, rows[0]["question"])]
    dec = Decoder("T1", 1.0, 1.0, 0)
    a = sample_shared_prefix(model, prompts, 16, dec, 8, tok.eos_token_id, tok.pad_token_id, seed=3)
    b = sample_shared_prefix(model, prompts, 16, dec, 8, tok.eos_token_id, tok.pad_token_id, seed=3)
    c = sample_shared_prefix(model, prompts, 16, dec, 8, tok.eos_token_id, tok.pad_token_id, seed=4)
    assert a == b and a != c
    assert len({tuple(x) for x in a[0]}) > 1  # a random model's samples differ


def test_second_token_distribution_from_expanded_cache(tiny_lm):
    """Tokens drawn after the cache expansion follow the model's conditional distribution."""
    from collections import Counter

    tok, model, rows, _ = tiny_lm
    p = encode_prompt(tok, rows[1]["question"])
    n = 3000
    out = sample_shared_prefix(model, [p], n, Decoder("T", 1.0, 1.0, 0), 2, -1, tok.pad_token_id, seed=5)[0]
    firsts = Counter(x[0] for x in out)
    with torch.no_grad():
        probs = 0
        for t1, c in firsts.items():  # expected second-token law = mixture of the conditionals
            probs = probs + c / n * torch.softmax(model(input_ids=torch.tensor([p + [t1]])).logits[0, -1].double(), -1)
    emp = torch.zeros_like(probs)
    for t, c in Counter(x[1] for x in out).items():
        emp[t] = c / n
    tv = 0.5 * (emp - probs).abs().sum().item()
    # total variation of an empirical distribution over ~V outcomes shrinks like sqrt(V / m)
    assert tv < 0.5 * (len(probs) / n) ** 0.5 + 0.03
    # a wrong cache (e.g. rows mixed up) gives the unconditional law instead: check we are closer to the truth
    assert tv < 0.5 * (emp - torch.softmax(model(input_ids=torch.tensor([p])).logits[0, -1].double(), -1)).abs().sum().item()


def test_top_p_and_top_k_filters():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    g = torch.Generator().manual_seed(0)
    draws = {int(_choose(logits, Decoder("p", 1.0, 0.6, 0), g)) for _ in range(200)}
    assert draws == {0, 1}  # nucleus 0.6 keeps the first two
    draws = {int(_choose(logits, Decoder("k", 1.0, 1.0, 3), g)) for _ in range(300)}
    assert draws == {0, 1, 2}
    assert int(_choose(logits, GREEDY, g)) == 0


def test_dropping_finished_rows_gives_the_same_tokens(tiny_lm, monkeypatch):
    """Compaction (rows that emitted EOS leave the forward pass) returns exactly the tokens of the plain
    loop, sampled and greedy, and it did happen: rows end at different steps and the cache was compacted."""
    import copy

    import paperflow.unlearning.sampling as S

    tok, model, rows, _ = tiny_lm
    m = copy.deepcopy(model)
    with torch.no_grad():  # make EOS likely, so that rows end at many different steps
        m.model.embed_tokens.weight[tok.eos_token_id] *= 2
    calls = []
    real = S._compact
    monkeypatch.setattr(S, "_compact", lambda cache, keep: (calls.append(int(keep.numel())), real(cache, keep)))
    prompts = [encode_prompt(tok, r["question"]) for r in rows[:7]]
    lengths = set()
    for dec, n in ((Decoder("T1", 1.0, 1.0, 50), 8), (Decoder("T07", 0.7, 0.9, 20), 4), (GREEDY, 1)):
        for prealloc in (True, False):
            kw = dict(seed=7, prompts_per_batch=3, preallocate=prealloc)
            new = sample_shared_prefix(m, prompts, n, dec, 16, tok.eos_token_id, tok.pad_token_id, **kw)
            old = sample_shared_prefix(m, prompts, n, dec, 16, tok.eos_token_id, tok.pad_token_id, compact=False, **kw)
            assert new == old
            lengths |= {len(c) for r in new for c in r}
    assert len(lengths) > 3 and calls  # early ends, and the cache was compacted
