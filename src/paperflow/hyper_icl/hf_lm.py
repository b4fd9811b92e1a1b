"""backend `hf_lm`: the Hyper-ICL path on a Hugging Face causal LM [recon].

Teacher: the frozen LM reading k demos and the query as text; student: the same frozen LM reading the query only,
plus the logit adapter (fixed or query-adaptive gate) in every layer's self-attention, distilled without demos with
the same objective as the tiny backend (`train.LossSpec`: CE + T²·KL on the 9 answer tokens, + the Euclidean or
Lorentz layer distance on the query positions' hidden states).

Episodes are the attribute world's items rendered as words: an item is ` c<colour> s<shape> n<count> ->`, a demo
adds its answer digit and ` ;`, and the answer is read from the LM's next-token logits of the 9 answer digits
(tokenised without a leading space; each must be one token). Every piece is tokenised on its own and the ids
concatenated, so the query's ids are identical in the teacher's and the student's input; the teacher's query
positions are its last |q| positions, as in the tiny backend. `model_path: tiny-llama` builds
`paperflow.nn.trl_grpo.tiny_llama` with a word tokenizer over the episode vocabulary (random init unless
`hf_lm.pretrain_steps` > 0: a mechanics check, not a result); any other path is loaded with
`AutoModelForCausalLM.from_pretrained` (staged weights; nothing is downloaded at run time).

The adapter wraps the model's attention modules (Llama / Qwen2 / Mistral layout: q_proj, k_proj, v_proj, o_proj,
rotary embeddings from the model's own module, grouped KV heads repeated) and recomputes attention eagerly with
`a_ij = q_i·k_jᵀ·scale + g · (q_i U)(k_j V)ᵀ/√r` on pre-rotary q, k; V = 0 at init, so the student starts as the
zero-shot LM (tested). Only U, V and the gate train; the LM's weights never change. Arms (c), (d), (i) are not
built on this backend.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperflow.core.seeding import seed_everything, stream
from paperflow.hyper_icl.data import N_COLOUR, N_COUNT, N_LABELS, N_SHAPE
from paperflow.hyper_icl.model import REFERENCE_KIND, Gate, check_param_band

log = logging.getLogger(__name__)

TINY = "tiny-llama"
TINY_VLM = "tiny-llava"  # nn.trl_vlm.tiny_llava: the items reach the model as images (vision: true)
VOCAB = ([f"c{i}" for i in range(N_COLOUR)] + [f"s{i}" for i in range(N_SHAPE)]
         + [f"n{i}" for i in range(1, N_COUNT + 1)] + [str(i) for i in range(N_LABELS)] + ["->", ";"])
HF_ARMS = ("zero_shot", "teacher", "logit_fixed", "logit_gated", "gated_euclid", "gated_lorentz",
           "gated_lorentz_noce", "gated_noteacher")
HF_KINDS = ("logit_fixed", "logit_adaptive")


# ------------------------------------------------------------------------------------------------ text
class Codec:
    """Episode pieces → token ids (each piece tokenised alone, ids concatenated) and the 9 answer token ids."""

    def __init__(self, tok: Any):
        self.tok = tok
        self._cache: dict[str, list[int]] = {}
        self.bos = [int(tok.bos_token_id)] if getattr(tok, "bos_token_id", None) is not None and \
            getattr(tok, "add_bos_token", False) else []
        self.answer_ids = []
        for d in range(N_LABELS):
            ids = self.ids(str(d))
            if len(ids) != 1:
                raise ValueError(f"hf_lm: answer {d!r} is {len(ids)} tokens in this tokenizer; need exactly 1")
            self.answer_ids.append(ids[0])
        if len(set(self.answer_ids)) != N_LABELS:
            raise ValueError("hf_lm: the 9 answers do not map to 9 distinct tokens")

    def ids(self, piece: str) -> list[int]:
        if piece not in self._cache:
            self._cache[piece] = list(self.tok(piece, add_special_tokens=False)["input_ids"])
        return self._cache[piece]

    def query(self, colour: int, shape: int, count: int) -> list[int]:
        return sum((self.ids(x) for x in (f" c{colour}", f" s{shape}", f" n{count}", " ->")), [])

    def answer(self, label: int) -> list[int]:
        return [self.answer_ids[int(label)]]  # the very token the logits are read at

    def demo(self, colour: int, shape: int, count: int, label: int) -> list[int]:
        return self.query(colour, shape, count) + self.answer(label) + self.ids(" ;")

    def episode(self, demos: Sequence[tuple[int, int, int, int]], query: tuple[int, int, int]) -> list[int]:
        return self.bos + sum((self.demo(*d) for d in demos), []) + self.query(*query)


PALETTE = ((220, 40, 40), (240, 150, 30), (230, 220, 40), (40, 170, 60), (40, 90, 220), (150, 60, 190))


def item_image(colour: int, shape: int, count: int, size: int) -> Any:
    """An item as a picture: `count` (1..4) copies of shape `shape` (9 primitives) in colour `colour` on white, in a
    2 × 2 grid, so the attributes are seen, not read."""
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (size, size), (255, 255, 255))
    d = ImageDraw.Draw(im)
    c, h = PALETTE[int(colour) % len(PALETTE)], size // 2
    for k in range(int(count)):
        x0, y0 = (k % 2) * h + h // 6, (k // 2) * h + h // 6
        x1, y1 = x0 + 2 * h // 3, y0 + 2 * h // 3
        xm, ym = (x0 + x1) // 2, (y0 + y1) // 2
        prim = int(shape)
        if prim == 0:
            d.ellipse((x0, y0, x1, y1), fill=c)
        elif prim == 1:
            d.rectangle((x0, y0, x1, y1), fill=c)
        elif prim == 2:
            d.polygon([(xm, y0), (x1, y1), (x0, y1)], fill=c)
        elif prim == 3:
            d.polygon([(xm, y0), (x1, ym), (xm, y1), (x0, ym)], fill=c)
        elif prim == 4:
            d.rectangle((x0, ym - h // 12, x1, ym + h // 12), fill=c)
            d.rectangle((xm - h // 12, y0, xm + h // 12, y1), fill=c)
        elif prim == 5:
            d.ellipse((x0, y0, x1, y1), outline=c, width=max(1, h // 10))
        elif prim == 6:
            d.rectangle((x0, ym - h // 8, x1, ym + h // 8), fill=c)
        elif prim == 7:
            d.rectangle((xm - h // 8, y0, xm + h // 8, y1), fill=c)
        else:
            d.polygon([(x0, y0), (x1, y0), (xm, y1)], fill=c)
    return im


class VisionCodec(Codec):
    """The items as images for a VLM (LLaVA family): an item is its image, then ` ->`.

    A sequence stays a plain list of ids, so every function above works unchanged: an image item is
    `n_img` copies of a *virtual* id `image_base + code(colour, shape, count)` (above the vocabulary), and
    `model_inputs` turns them into the model's image token plus `pixel_values` (images in reading order,
    row by row), right before the forward pass."""

    def __init__(self, processor: Any, image_size: int):
        super().__init__(processor.tokenizer)
        self.processor, self.size = processor, int(image_size)
        self.image_token = int(processor.tokenizer.convert_tokens_to_ids(processor.image_token))
        probe = processor(text=processor.image_token, images=[item_image(0, 0, 1, self.size)], return_tensors="pt")
        self.n_img = int((probe["input_ids"] == self.image_token).sum())
        self.image_base = max(len(processor.tokenizer), int(self.image_token) + 1) + 1

    def code(self, colour: int, shape: int, count: int) -> int:
        return (int(colour) * N_SHAPE + int(shape)) * N_COUNT + int(count) - 1

    def query(self, colour: int, shape: int, count: int) -> list[int]:
        return [self.image_base + self.code(colour, shape, count)] * self.n_img + self.ids(" ->")

    def model_inputs(self, ids: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """(ids with the image token, the image processor's tensors for the images in reading order)."""
        virtual = ids >= self.image_base
        if not bool(virtual.any()):
            return ids, {}
        codes = (ids[virtual] - self.image_base).tolist()[:: self.n_img]  # one code per image (runs of n_img)
        images = []
        for code in codes:
            rest, n = divmod(int(code), N_COUNT)
            c, sh = divmod(rest, N_SHAPE)
            images.append(item_image(c, sh, n + 1, self.size))
        px = self.processor.image_processor(images, return_tensors="pt")
        out = ids.clone()
        out[virtual] = self.image_token
        return out, {k: v for k, v in px.items()}


def model_kwargs(codec: Codec, ids: Tensor) -> tuple[Tensor, dict[str, Any]]:
    return codec.model_inputs(ids) if isinstance(codec, VisionCodec) else (ids, {})


def pad_left(seqs: Sequence[list[int]], pad: int) -> tuple[Tensor, Tensor]:
    """Left-pad to one length (the last position is every sequence's query end). → (ids, attention_mask)."""
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, n - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, n - len(s):] = 1
    return ids, mask


def episode_ids(codec: Codec, ep: Mapping[str, np.ndarray], k: int | None = None) -> list[list[int]]:
    """Training episodes (demos = items 0..n-2, query = the last item; `k` keeps the last k demos)."""
    out = []
    n = ep["label"].shape[1]
    for e in range(ep["label"].shape[0]):
        js = list(range(n - 1))[-k:] if k else ([] if k == 0 else list(range(n - 1)))
        demos = [(int(ep["colour"][e, j]), int(ep["shape"][e, j]), int(ep["count"][e, j]), int(ep["label"][e, j]))
                 for j in js]
        out.append(codec.episode(demos, (int(ep["colour"][e, -1]), int(ep["shape"][e, -1]), int(ep["count"][e, -1]))))
    return out


def query_ids(codec: Codec, colour: np.ndarray, shape: np.ndarray, count: np.ndarray) -> list[list[int]]:
    return [codec.bos + codec.query(int(c), int(s), int(n)) for c, s, n in zip(colour, shape, count)]


# ------------------------------------------------------------------------------------------------ model
def load_lm(hp: Mapping[str, Any], seed: int, device: str | torch.device = "cpu") -> tuple[Any, Any]:
    """(frozen LM in eval mode with eager attention, tokenizer) for `hp` = the config's `hf_lm` section."""
    path = str(hp["model_path"])
    if path == TINY:
        from paperflow.nn.trl_grpo import tiny_llama, word_tokenizer

        tok = word_tokenizer(VOCAB)
        lm = tiny_llama(len(tok), hidden=int(hp["tiny_hidden"]), layers=int(hp["tiny_layers"]),
                        heads=int(hp["tiny_heads"]), seed=seed)
    elif path == TINY_VLM or hp.get("vision"):
        from paperflow.nn import trl_vlm

        if path == TINY_VLM:
            tok = trl_vlm.word_processor(VOCAB, image_size=28)
            lm = trl_vlm.tiny_llava(tok, hidden=int(hp["tiny_hidden"]), layers=int(hp["tiny_layers"]), seed=seed)
        else:
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[str(hp["dtype"])]
            lm, tok = trl_vlm.load_vlm(path, dtype)
        if tok.tokenizer.pad_token_id is None:
            tok.tokenizer.pad_token = tok.tokenizer.eos_token
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[str(hp["dtype"])]
        tok = AutoTokenizer.from_pretrained(path)
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if getattr(tok, "pad_token_id", 0) is None:
        tok.pad_token = tok.eos_token
    if hasattr(lm, "set_attn_implementation"):
        lm.set_attn_implementation("eager")  # 4D additive masks reach the (wrapped) attention modules
    else:
        lm.config._attn_implementation = "eager"
    for prm in lm.parameters():
        prm.requires_grad_(False)
    return lm.to(device).eval(), tok


def text_config(lm: Any) -> Any:
    """The language model's config (a VLM keeps it under `text_config`)."""
    return getattr(lm.config, "text_config", None) or lm.config


def make_codec(tok: Any, hp: Mapping[str, Any]) -> Codec:
    """`Codec` for a tokenizer; `VisionCodec` (items as images) for a processor (tiny-llava or `vision: true`)."""
    if hasattr(tok, "image_processor"):
        return VisionCodec(tok, int(hp["image_size"]))
    return Codec(tok)


def distill_layers(lm: Any, hp: Mapping[str, Any]) -> list[int]:
    """Every `distill_every`-th hidden state 1..L (the last layer if none)."""
    L = int(text_config(lm).num_hidden_layers)
    e = int(hp["distill_every"])
    return list(range(e, L + 1, e)) or [L]


class HFAdaptedAttention(nn.Module):
    """A frozen HF attention module (Llama layout) plus the logit adapter; attention recomputed eagerly."""

    def __init__(self, base: nn.Module, hidden: int, n_heads: int, kind: str, p: Mapping[str, Any]):
        super().__init__()
        if kind not in HF_KINDS:
            raise ValueError(f"hf_lm: unknown attention adapter {kind!r}")
        self.base, self.kind = base, kind
        self.dh = int(base.head_dim)
        self.H, self.r = n_heads, int(p["rank"])
        mod = sys.modules[type(base).__module__]
        self._rotary, self._repeat = mod.apply_rotary_pos_emb, mod.repeat_kv
        self.U = nn.Parameter(torch.randn(n_heads, self.dh, self.r) / math.sqrt(self.dh))
        self.V = nn.Parameter(torch.zeros(n_heads, self.dh, self.r))
        if kind == "logit_fixed":
            self.gate_logit = nn.Parameter(torch.zeros(n_heads))
        else:
            self.gate = Gate(hidden, n_heads, int(p["gate_hidden"]))

    def forward(self, hidden_states: Tensor, position_embeddings: tuple[Tensor, Tensor] | None = None,
                attention_mask: Tensor | None = None, **kwargs: Any) -> tuple[Tensor, Tensor]:
        b = self.base
        B, T, _ = hidden_states.shape
        shape = (B, T, -1, self.dh)
        q = b.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = b.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = b.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings  # type: ignore[misc]
        qr, kr = self._rotary(q, k, cos, sin)
        g_kv = int(b.num_key_value_groups)
        kr, k, v = self._repeat(kr, g_kv), self._repeat(k, g_kv), self._repeat(v, g_kv)
        scores = (qr.float() @ kr.float().transpose(-2, -1)) * float(b.scaling)
        qu = torch.einsum("bhtd,hdr->bhtr", q.float(), self.U)
        kv = torch.einsum("bhtd,hdr->bhtr", k.float(), self.V)
        g = (torch.sigmoid(self.gate_logit)[None, :, None, None] if self.kind == "logit_fixed"
             else self.gate(hidden_states.float()))
        scores = scores + g * (qu @ kv.transpose(-2, -1)) / math.sqrt(self.r)
        if attention_mask is None:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1),
                                        float("-inf"))
        elif attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask[..., :T], float("-inf"))
        else:
            scores = scores + attention_mask[..., :T].float()
        w = scores.softmax(-1)
        y = (w.to(v.dtype) @ v).transpose(1, 2).reshape(B, T, -1)
        return b.o_proj(y), w


def _layers(lm: Any) -> Any:
    inner = lm.model
    return inner.layers if hasattr(inner, "layers") else inner.language_model.layers  # causal LM / LLaVA-style VLM


@contextlib.contextmanager
def adapted(lm: Any, kind: str, p: Mapping[str, Any]) -> Iterator[list[nn.Parameter]]:
    """Wrap every layer's self-attention with a fresh adapter of `kind`; yields the trainable parameters and puts
    the original modules back afterwards (the LM is shared by every arm, never copied)."""
    cfg = text_config(lm)
    dev = next(lm.parameters()).device
    originals = [layer.self_attn for layer in _layers(lm)]
    try:
        for layer in _layers(lm):
            layer.self_attn = HFAdaptedAttention(layer.self_attn, int(cfg.hidden_size),
                                                 int(cfg.num_attention_heads), kind, p).to(dev)
        yield [q for layer in _layers(lm) for n, q in layer.self_attn.named_parameters() if not n.startswith("base.")]
    finally:
        for layer, orig in zip(_layers(lm), originals):
            layer.self_attn = orig


def hf_param_band(lm: Any, p: Mapping[str, Any], arms: Sequence[str]) -> dict[str, dict[str, float]]:
    """As `train.param_band` for the hf_lm arms: counts on the built adapters, checked against (f)."""
    from paperflow.hyper_icl.train import ARMS, EVAL_ONLY

    bad = [a for a in arms if a not in HF_ARMS]
    if bad:
        raise NotImplementedError(f"hyper_icl backend hf_lm builds the arms {HF_ARMS}; not {bad} (shift vectors, "
                                  "virtual KV and LoRA run on the tiny backend only)")
    kinds = {REFERENCE_KIND} | {ARMS[a][0] for a in arms if a not in EVAL_ONLY}
    counts = {}
    for kind in sorted(kinds):
        with adapted(lm, kind, p) as params:
            counts[kind] = int(sum(q.numel() for q in params))
    ratios = check_param_band(counts, float(p["max_param_ratio"]))
    return {a: {"n_params": counts[ARMS[a][0]], "ratio": round(ratios[ARMS[a][0]], 4)}
            for a in arms if a not in EVAL_ONLY}


# ------------------------------------------------------------------------------------------- forward passes
def _batches(n: int, bs: int) -> Iterator[slice]:
    for i in range(0, n, bs):
        yield slice(i, min(n, i + bs))


def answer_logits(lm: Any, codec: Codec, seqs: Sequence[list[int]], hidden_layers: Sequence[int] = (),
                  q_len: int = 0) -> tuple[Tensor, list[Tensor]]:
    """9-way answer logits at the last position [B, 9] and, for `hidden_layers`, the last `q_len` positions'
    states ([B, q_len, D] each)."""
    dev = next(lm.parameters()).device
    ids, mask = pad_left(seqs, int(codec.tok.pad_token_id))
    ids, extra = model_kwargs(codec, ids)
    out = lm(input_ids=ids.to(dev), attention_mask=mask.to(dev), output_hidden_states=bool(hidden_layers),
             use_cache=False, **{k: v.to(dev) for k, v in extra.items()})
    logits = out.logits[:, -1, codec.answer_ids].float()
    return logits, [out.hidden_states[li][:, -q_len:] for li in hidden_layers]


@torch.no_grad()
def predict(lm: Any, codec: Codec, seqs: Sequence[list[int]], batch: int) -> np.ndarray:
    return torch.cat([answer_logits(lm, codec, seqs[s])[0].argmax(-1).cpu()
                      for s in _batches(len(seqs), batch)]).numpy()


@torch.no_grad()
def teacher_outputs(lm: Any, codec: Codec, ep: Mapping[str, np.ndarray], layers: list[int], q_len: int,
                    batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The teacher (LM + the episode's demos) on target training episodes: answer logits [E, 9] and the query
    positions' states [E, |layers|, q_len, D] (float32)."""
    seqs = episode_ids(codec, ep)
    logits, hidden = [], []
    for s in _batches(len(seqs), batch):
        lg, hs = answer_logits(lm, codec, seqs[s], layers, q_len)
        logits.append(lg.cpu())
        hidden.append(torch.stack([h.float().cpu() for h in hs], 1))
    return torch.cat(logits).numpy(), torch.cat(hidden).numpy()


def teacher_eval(lm: Any, codec: Codec, q: Mapping[str, np.ndarray], batch: int) -> np.ndarray:
    """Predictions [D, Q] of the teacher for every demo draw and ordering."""
    Q, D, k = q["demo_label"].shape
    rows = []
    for d in range(D):
        seqs = [codec.episode([(int(q["demo_colour"][i, d, j]), int(q["demo_shape"][i, d, j]),
                                int(q["demo_count"][i, d, j]), int(q["demo_label"][i, d, j])) for j in range(k)],
                              (int(q["colour"][i]), int(q["shape"][i]), int(q["count"][i]))) for i in range(Q)]
        rows.append(predict(lm, codec, seqs, batch))
    return np.stack(rows)


@torch.no_grad()
def icl_curve(lm: Any, codec: Codec, ep: Mapping[str, np.ndarray], batch: int) -> dict[str, list[float]]:
    """Accuracy with k = 0..n-1 demos (the last k of the episode's demos) on held-out pre-training episodes."""
    n = ep["label"].shape[1]
    y = ep["label"][:, -1]
    return {"all": [float((predict(lm, codec, episode_ids(codec, ep, k), batch) == y).mean()) for k in range(n)]}


def pretrain(lm: Any, codec: Codec, ep: Mapping[str, np.ndarray], hp: Mapping[str, Any], seed: int,
             lr: float, batch: int) -> list[dict[str, float]]:
    """Optional LM training on the pre-training episodes (answer tokens after every `->`), for `tiny-llama` only:
    a random tiny LM has no ICL to distil. The LM is frozen again afterwards."""
    steps = int(hp["pretrain_steps"])
    if not steps:
        return []
    if str(hp["model_path"]) not in (TINY, TINY_VLM):
        raise ValueError("hf_lm.pretrain_steps > 0 is for model_path tiny-llama / tiny-llava only (a real LM stays "
                         "as loaded)")
    seed_everything(seed)
    dev = next(lm.parameters()).device
    for prm in lm.parameters():
        prm.requires_grad_(True)
    opt = torch.optim.AdamW(lm.parameters(), lr=lr)
    arrow = codec.ids(" ->")[-1]
    answers = torch.tensor(codec.answer_ids, device=dev)
    seqs = [s + codec.answer(lab) for s, lab in zip(episode_ids(codec, ep), ep["label"][:, -1])]
    n, hist = len(seqs), []
    lm.train()
    for step in range(steps):
        idx = stream(seed, "hf_pretrain", step).choice(n, size=min(batch, n), replace=False)
        ids, mask = pad_left([seqs[i] for i in idx], int(codec.tok.pad_token_id))
        model_ids, extra = model_kwargs(codec, ids)
        ids, mask = ids.to(dev), mask.to(dev)
        logits = lm(input_ids=model_ids.to(dev), attention_mask=mask, use_cache=False,
                    **{k: v.to(dev) for k, v in extra.items()}).logits[:, :-1]
        at = (ids[:, :-1] == arrow) & mask[:, :-1].bool()  # positions whose next token is an answer
        loss = F.cross_entropy(logits[at][:, answers], (ids[:, 1:][at][:, None] == answers).float().argmax(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            hist.append({"step": step, "loss": float(loss.detach())})
    for prm in lm.parameters():
        prm.requires_grad_(False)
    lm.eval()
    return hist


# ------------------------------------------------------------------------------------------------ students
def train_student(arm: str, lm: Any, codec: Codec, p: Mapping[str, Any], ep: Mapping[str, np.ndarray],
                  t_logits: np.ndarray, t_hidden: np.ndarray, layers: list[int], q_len: int, seed: int,
                  evaluate: Mapping[str, Sequence[list[int]]]) -> tuple[dict[str, np.ndarray], list[dict[str, float]],
                                                                        int]:
    """Train one logit-adapter arm on the LM (demo-free), evaluate it on `evaluate` (name → query id lists) while
    the adapter is attached. → (predictions per name, history, trainable parameters)."""
    from paperflow.hyper_icl.train import ARMS, LossSpec

    kind = ARMS[arm][0]
    seed_everything(seed)
    spec = LossSpec(arm, p, t_hidden, layers)
    dev = next(lm.parameters()).device
    seqs = query_ids(codec, ep["colour"][:, -1], ep["shape"][:, -1], ep["count"][:, -1])
    y = torch.from_numpy(ep["label"][:, -1]).to(dev)
    tl, th = torch.from_numpy(t_logits).to(dev), torch.from_numpy(t_hidden).to(dev)
    n, bs = len(seqs), int(p["adapter_batch"])
    per_epoch = max(1, n // bs)
    hist: list[dict[str, float]] = []
    with adapted(lm, kind, p) as params:
        opt = torch.optim.Adam(params, lr=float(p["adapter_lr"]))
        order = np.empty(0, np.int64)
        for step in range(int(p["adapter_steps"])):
            epoch, j = divmod(step, per_epoch)
            if j == 0 or order.size == 0:
                order = stream(seed, arm, "epoch", epoch).permutation(n)
            idx = order[j * bs:(j + 1) * bs]
            logits, hidden = answer_logits(lm, codec, [seqs[i] for i in idx], layers if spec.beta else (), q_len)
            it = torch.from_numpy(idx).to(dev)
            loss, dist = spec(logits, y[it], tl[it], hidden, th[it])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 50 == 0 or step == int(p["adapter_steps"]) - 1:
                hist.append({"step": step, "loss": float(loss.detach()), "dist": float(dist.detach())})
        preds = {name: predict(lm, codec, s, int(p["adapter_batch"])) for name, s in evaluate.items()}
        n_params = int(sum(q.numel() for q in params))
    return preds, hist, n_params


def run_arms(arms: list[str], lm: Any, codec: Codec, p: Mapping[str, Any], data: Mapping[str, Any], target: str,
             warm: list[int], seed: int) -> dict[str, Any]:
    """As `train.run_arms` on the hf_lm backend: same result keys, so aggregate / report are shared."""
    from paperflow.hyper_icl.train import EVAL_ONLY, arm_result

    hp = p["hf_lm"]
    ep, test, val = data["train"], data["test"], data["val"]
    k = ep["label"].shape[1] - 1
    bs = int(hp["eval_batch"])
    layers = distill_layers(lm, hp)
    q_len = len(codec.query(0, 0, 1))
    evaluate = {s: query_ids(codec, d["colour"], d["shape"], d["count"]) for s, d in (("test", test), ("val", val))}
    t_logits = t_hidden = None
    if any(a not in EVAL_ONLY for a in arms):
        t_logits, t_hidden = teacher_outputs(lm, codec, ep, layers, q_len, bs)
    res: dict[str, Any] = {}
    for arm in arms:
        t0 = time.perf_counter()
        if arm == "zero_shot":
            pred, val_pred = (predict(lm, codec, evaluate["test"], bs), predict(lm, codec, evaluate["val"], bs))
            n_params, tokens, hist = 0, len(codec.bos) + q_len, []
        elif arm == "teacher":
            pred, val_pred = teacher_eval(lm, codec, test, bs), teacher_eval(lm, codec, val, bs)
            n_params, hist = 0, []
            tokens = len(codec.episode([(0, 0, 1, 0)] * k, (0, 0, 1)))
        else:
            preds, hist, n_params = train_student(arm, lm, codec, p, ep, t_logits, t_hidden,  # type: ignore[arg-type]
                                                  layers, q_len, seed, evaluate)
            pred, val_pred, tokens = preds["test"], preds["val"], len(codec.bos) + q_len
        r = arm_result(arm, pred, test, target, warm, n_params, tokens, time.perf_counter() - t0)
        r["val_acc"] = float((np.atleast_2d(val_pred) == val["label"][None]).mean())
        r["history"] = hist
        res[arm] = r
        log.info("hf_lm %s %s s%d: acc %.3f (%d params, %.1f s)", target, arm, seed, r["acc"], n_params,
                 r["train_seconds"])
    return res
