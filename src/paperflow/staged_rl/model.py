"""The policy: the shared small causal transformer (`paperflow.nn.transformer`) over a mixed sequence of word
tokens and image slots, with sampling / greedy decoding, optional `<look>` tokens, parsing and rewards.

Sequence (one row): prefix + question + completion.
- prefix: image = `<img>` × n_slots (each position's input is embed(`<img>`) + in_proj(slot vector): the slot
  vectors enter through the transformer's layer-0 `steer` hook), caption = the colour words, text: nothing;
- question: perc `how_many <c> opts a b c d ?`, vis `<c1> + <c2> ?`, text `a + b ?`, describe `describe ?`;
- completion (what the policy emits): `[<look>]* <see> n.. </see> <ans> k <eos>` (text: `<ans> k <eos>`,
  describe: `<see> n_red n_orange n_green n_blue </see> <eos>`).
A `<look>` (at most `max_looks` of them act) appends a fresh noisy copy of the scene (n_slots `<img>`
positions the policy does not emit) and costs `look_cost` reward. Reward = 1[answer correct] − cost · looks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from paperflow.nn.transformer import KVCache, Transformer, TransformerConfig
from paperflow.staged_rl.data import CAPTION, COLOURS, DESCRIBE, IMAGE, PERC, TEXT, VIS

MAX_NUM = 12
VOCAB = (["<pad>", "<eos>"] + [str(i) for i in range(MAX_NUM + 1)] + list(COLOURS)
         + ["none", "+", "?", "how_many", "opts", "describe", "<img>", "<see>", "</see>", "<ans>", "<look>"])
TOK = {w: i for i, w in enumerate(VOCAB)}
PAD, EOS, IMG, SEE, ESEE, ANS, LOOK = (TOK[w] for w in ("<pad>", "<eos>", "<img>", "<see>", "</see>", "<ans>",
                                                        "<look>"))
DIGIT0 = TOK["0"]


def build_policy(p: Mapping[str, Any], feat_dim: int) -> Transformer:
    return Transformer(TransformerConfig(d_model=int(p["d_model"]), n_heads=int(p["heads"]),
                                         n_layers=int(p["layers"]), vocab_size=len(VOCAB), input_dim=feat_dim,
                                         out_dim=len(VOCAB), causal=True))


def forward(net: Transformer, tokens: Tensor, feats: Tensor, img: Tensor, cache: KVCache | None = None,
            start: int = 0) -> Tensor:
    """Logits [B, T, V]; image positions add in_proj(slot vector) to the `<img>` embedding (steer at layer 0).
    With `cache`, the inputs are positions start.. of the cached sequences (`Transformer.forward`'s kv_cache)."""
    assert net.in_proj is not None
    vis = net.in_proj(feats) * img[..., None].to(feats.dtype)
    return net(tokens, steer={0: vis}, kv_cache=cache, cache_start=start).logits  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------ sequences
def prompt_words(task: int, prefix: int, colours: np.ndarray, q: np.ndarray, options: np.ndarray) -> list[str]:
    n_slots = len(colours)
    if prefix == IMAGE:
        pre = ["<img>"] * n_slots
    elif prefix == CAPTION:
        pre = [COLOURS[c] if c >= 0 else "none" for c in colours]
    else:
        pre = []
    if task == PERC:
        qq = ["how_many", COLOURS[q[0]], "opts"] + [str(int(o)) for o in options] + ["?"]
    elif task == VIS:
        qq = [COLOURS[q[0]], "+", COLOURS[q[1]], "?"]
    elif task == TEXT:
        qq = [str(int(q[0])), "+", str(int(q[1])), "?"]
    else:
        qq = ["describe", "?"]
    return pre + qq


def target_words(task: int, see: np.ndarray, answer: int) -> list[str]:
    """The supervised completion (no `<look>`; the warm-up inserts those separately)."""
    if task == TEXT:
        return ["<ans>", str(answer), "<eos>"]
    k = {PERC: 1, VIS: 2, DESCRIBE: 4}[task]
    s = ["<see>"] + [str(int(x)) for x in see[:k]] + ["</see>"]
    return s + (["<eos>"] if task == DESCRIBE else ["<ans>", str(answer), "<eos>"])


@dataclass
class Prompts:
    """Right-padded prompts: tokens [N, P], feats [N, P, F], img [N, P] (bool), plen [N], plus per-row scene
    colours [N, n_slots] (fresh looks), task [N], see [N, 4], answer [N], has_scene [N] (bool)."""

    tokens: Tensor
    feats: Tensor
    img: Tensor
    plen: Tensor
    colours: Tensor
    task: Tensor
    see: Tensor
    answer: Tensor
    has_scene: Tensor

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def take(self, idx: Tensor) -> "Prompts":
        return Prompts(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    def repeat(self, g: int) -> "Prompts":
        return Prompts(*(getattr(self, f).repeat_interleave(g, 0) for f in self.__dataclass_fields__))


def make_prompts(d: Mapping[str, np.ndarray], prefix: int | None = None, width: int = 0) -> Prompts:
    """Prompts for every row of a split (prefix: override the split's own prefix, e.g. CAPTION for the filter;
    width: pad to at least this many positions, so prompts of different sets concatenate)."""
    n, n_slots, fd = d["feats"].shape
    rows = []
    for i in range(n):
        pre = int(d["prefix"][i]) if prefix is None or int(d["task"][i]) == TEXT else prefix
        rows.append((pre, prompt_words(int(d["task"][i]), pre, d["colours"][i], d["q"][i], d["options"][i])))
    P = max([width] + [len(w) for _, w in rows])
    tokens = np.full((n, P), PAD, np.int64)
    feats = np.zeros((n, P, fd), np.float32)
    img = np.zeros((n, P), bool)
    for i, (pre, words) in enumerate(rows):
        tokens[i, :len(words)] = [TOK[w] for w in words]
        if pre == IMAGE:
            feats[i, :n_slots] = d["feats"][i]
            img[i, :n_slots] = True
    return Prompts(torch.from_numpy(tokens), torch.from_numpy(feats), torch.from_numpy(img),
                   torch.tensor([len(w) for _, w in rows]), torch.from_numpy(d["colours"].astype(np.int64)),
                   torch.from_numpy(d["task"].astype(np.int64)), torch.from_numpy(d["see"].astype(np.int64)),
                   torch.from_numpy(d["answer"].astype(np.int64)),
                   torch.from_numpy(np.array([int(d["task"][i]) != TEXT for i in range(n)], bool)))


def supervised_batch(d: Mapping[str, np.ndarray], protos: np.ndarray, sigma: float, look_rate: float,
                     rng: np.random.Generator) -> dict[str, Tensor]:
    """Teacher-forced sequences (prompt + target) with a loss mask on the completion tokens; a share
    `look_rate` of image rows start their completion with one `<look>` and its fresh scene copy."""
    n, n_slots, fd = d["feats"].shape
    seqs = []
    for i in range(n):
        task, pre = int(d["task"][i]), int(d["prefix"][i])
        pw = prompt_words(task, pre, d["colours"][i], d["q"][i], d["options"][i])
        tw = target_words(task, d["see"][i], int(d["answer"][i]))
        look = pre == IMAGE and rng.random() < look_rate
        seqs.append((pre, pw, tw, look))
    T = max(len(pw) + len(tw) + (1 + n_slots if look else 0) for _, pw, tw, look in seqs)
    tokens = np.full((n, T), PAD, np.int64)
    feats = np.zeros((n, T, fd), np.float32)
    img = np.zeros((n, T), bool)
    loss = np.zeros((n, T), bool)
    for i, (pre, pw, tw, look) in enumerate(seqs):
        words = list(pw)
        if pre == IMAGE:
            feats[i, :n_slots] = d["feats"][i]
            img[i, :n_slots] = True
        if look:
            words.append("<look>")
            loss[i, len(words) - 1] = True
            s = len(words)
            words += ["<img>"] * n_slots
            cols = d["colours"][i].astype(np.int64)
            feats[i, s:s + n_slots] = protos[cols] + sigma * rng.standard_normal((n_slots, fd))
            img[i, s:s + n_slots] = True
        s = len(words)
        words += tw
        loss[i, s:len(words)] = True
        tokens[i, :len(words)] = [TOK[w] for w in words]
    return {"tokens": torch.from_numpy(tokens), "feats": torch.from_numpy(feats), "img": torch.from_numpy(img),
            "loss": torch.from_numpy(loss)}


def supervised_loss(net: Transformer, b: Mapping[str, Tensor]) -> Tensor:
    logits = forward(net, b["tokens"], b["feats"], b["img"])[:, :-1]
    tgt, m = b["tokens"][:, 1:], b["loss"][:, 1:]
    return torch.nn.functional.cross_entropy(logits[m], tgt[m])


# ----------------------------------------------------------------------------------------------- decoding
@dataclass
class Rollout:
    tokens: Tensor  # [B, T]
    feats: Tensor
    img: Tensor
    gen: Tensor  # [B, T] bool: positions the policy emitted (these carry log-probs)
    n_looks: Tensor  # [B] `<look>` tokens emitted
    n_tokens: Tensor  # [B] tokens emitted (incl. `<look>` and `<eos>`; the scene copies are not emitted)


@torch.no_grad()
def generate(net: Transformer, pr: Prompts, protos: Tensor, sigma: float, *, greedy: bool, max_new: int,
             max_looks: int, gen: torch.Generator | None = None, cache: bool = True) -> Rollout:
    """Sample (or greedily decode) completions for every prompt row; `<look>` appends a fresh scene copy.

    cache=True: incremental decoding with a key/value cache. Rows grow at different rates (a `<look>` adds
    1 + n_slots positions), so each step recomputes the window from the earliest position not yet cached for a
    live row to the longest row (positions a row has not reached yet are recomputed once it does). The same
    computation as cache=False up to float rounding (tested: same greedy tokens, logits within 1e-5)."""
    B, n_slots = len(pr), pr.colours.shape[1]
    T = int(pr.plen.max()) + max_new + max_looks * n_slots
    tokens = torch.full((B, T), PAD, dtype=torch.long)
    feats = torch.zeros(B, T, pr.feats.shape[-1])
    img = torch.zeros(B, T, dtype=torch.bool)
    P = pr.tokens.shape[1]
    tokens[:, :P], feats[:, :P], img[:, :P] = pr.tokens, pr.feats, pr.img
    is_gen = torch.zeros(B, T, dtype=torch.bool)
    cur = pr.plen.clone()
    done = torch.zeros(B, dtype=torch.bool)
    looks = torch.zeros(B, dtype=torch.long)
    acted = torch.zeros(B, dtype=torch.long)
    rows = torch.arange(B)
    offs = torch.arange(n_slots)
    kv = net.new_kv_cache(B, T) if cache else None
    cached = torch.zeros(B, dtype=torch.long)  # per row: positions 0..cached-1 hold final keys/values
    for _ in range(max_new):
        L = int(cur.max())
        w = int(cached[~done].min()) if kv is not None else 0
        out = forward(net, tokens[:, w:L], feats[:, w:L], img[:, w:L], kv, w)
        logits = out[rows, (cur - 1 - w).clamp(min=0)]  # (finished rows: ignored)
        if kv is not None:
            cached = cur.clone()  # everything before a row's current end is final
        if greedy:
            tok = logits.argmax(-1)
        else:
            tok = torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=gen).squeeze(-1)
        act = ~done
        r = rows[act]
        tokens[r, cur[r]] = tok[r]
        is_gen[r, cur[r]] = True
        cur[r] += 1
        is_look = act & (tok == LOOK)
        looks += is_look.long()
        copy = is_look & (acted < max_looks) & pr.has_scene
        if copy.any():
            rc = rows[copy]
            pos = (cur[rc, None] + offs).reshape(-1)
            rr = rc.repeat_interleave(n_slots)
            noise = torch.randn(len(rc), n_slots, protos.shape[1], generator=gen)
            feats[rr, pos] = (protos[pr.colours[rc]] + sigma * noise).reshape(-1, protos.shape[1])
            tokens[rr, pos] = IMG
            img[rr, pos] = True
            cur[rc] += n_slots
            acted[rc] += 1
        done |= act & (tok == EOS)
        if bool(done.all()):
            break
    L = int(cur.max())
    return Rollout(tokens[:, :L], feats[:, :L], img[:, :L], is_gen[:, :L], looks, is_gen.sum(1))


def token_logprobs(net: Transformer, ro: Rollout) -> tuple[Tensor, Tensor]:
    """Per-token log-probs [B, T-1] of the emitted tokens under `net`, and the mask of emitted positions."""
    logits = forward(net, ro.tokens, ro.feats, ro.img)[:, :-1]
    logp = torch.log_softmax(logits.float(), -1).gather(-1, ro.tokens[:, 1:, None]).squeeze(-1)
    return logp, ro.gen[:, 1:]


def parse(ro: Rollout) -> tuple[list[list[int] | None], list[int | None], list[bool]]:
    """Per row of `[<look>]* [<see> n.. </see>] <ans> k <eos>`: the `<see>` numbers (None if absent or
    malformed), the `<ans>` number (None unless the tail is exactly `<ans> k <eos>`), and whether the tail after
    the `<see>` span is exactly `<eos>` (the describe format)."""
    sees: list[list[int] | None] = []
    answers: list[int | None] = []
    bare: list[bool] = []
    for t, g in zip(ro.tokens.tolist(), ro.gen.tolist()):
        words = [w for w, m in zip(t, g) if m]
        while words and words[0] == LOOK:
            words.pop(0)
        see: list[int] | None = None
        if words and words[0] == SEE and ESEE in words:
            j = words.index(ESEE)
            nums = words[1:j]
            if nums and all(DIGIT0 <= w <= DIGIT0 + MAX_NUM for w in nums):
                see = [w - DIGIT0 for w in nums]
                words = words[j + 1:]
        ok_ans = len(words) == 3 and words[0] == ANS and DIGIT0 <= words[1] <= DIGIT0 + MAX_NUM and words[2] == EOS
        sees.append(see)
        answers.append(words[1] - DIGIT0 if ok_ans else None)
        bare.append(see is not None and words == [EOS])
    return sees, answers, bare


def rewards(pr: Prompts, ro: Rollout, look_cost: float) -> tuple[Tensor, Tensor]:
    """(reward [B], correct [B] bool): 1[answer == gold] − look_cost · looks (describe: exact count vector)."""
    sees, answers, bare = parse(ro)
    correct = torch.zeros(len(pr), dtype=torch.bool)
    for i, (s, a) in enumerate(zip(sees, answers)):
        if int(pr.task[i]) == DESCRIBE:
            correct[i] = bare[i] and s == pr.see[i].tolist()
        else:
            correct[i] = a is not None and a == int(pr.answer[i])
    return correct.float() - look_cost * ro.n_looks.float(), correct


def see_correct(pr: Prompts, ro: Rollout) -> Tensor:
    """[B] bool: the `<see>` span equals the true counts (perc 1 value, vis 2)."""
    sees = parse(ro)[0]
    out = torch.zeros(len(pr), dtype=torch.bool)
    for i, s in enumerate(sees):
        k = {PERC: 1, VIS: 2, DESCRIBE: 4}.get(int(pr.task[i]), 0)
        out[i] = k > 0 and s is not None and s == pr.see[i, :k].tolist()
    return out


def answers_of(ro: Rollout) -> list[int | None]:
    return parse(ro)[1]
