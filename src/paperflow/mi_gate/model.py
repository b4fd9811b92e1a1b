"""The tiny captioner (image → colour and shape, verbalised "a red square") and the late-fusion model
(64 units per modality, concatenated, 2 classes) that stands in for the SFT'd VLM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from paperflow.core.seeding import stream
from paperflow.mi_gate.data import COLOURS, SHAPES


class Adam:
    """Plain Adam (bias-corrected, L2 weight decay) on a parameter list. torch.optim's first step imports
    torch._dynamo (≈ 1.5 s idle, 4–8 s under load) in every job; these MLPs need none of it."""

    def __init__(self, params: Sequence[Any], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        import torch

        self.torch = torch
        self.params = [q for q in params if q.requires_grad]
        self.lr, self.b1, self.b2, self.eps, self.wd = lr, betas[0], betas[1], eps, weight_decay
        self.m = [torch.zeros_like(q) for q in self.params]
        self.v = [torch.zeros_like(q) for q in self.params]
        self.t = 0

    def zero_grad(self) -> None:
        for q in self.params:
            q.grad = None

    def step(self) -> None:
        self.t += 1
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        with self.torch.no_grad():
            for q, m, v in zip(self.params, self.m, self.v):
                if q.grad is None:
                    continue
                g = q.grad + self.wd * q if self.wd else q.grad
                m.mul_(self.b1).add_(g, alpha=1 - self.b1)
                v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
                q.addcdiv_(m / c1, (v / c2).sqrt_().add_(self.eps), value=-self.lr)


def _train(torch: Any, net: Any, inputs: Sequence[Any], loss_fn: Any, n: int, p: Mapping[str, Any],
           seed: int) -> list[float]:
    opt = Adam(list(net.parameters()), lr=float(p["lr"]), weight_decay=float(p.get("weight_decay", 0.0)))
    rng = stream(seed, "batches")
    bs = int(p["batch_size"])
    hist = []
    for _ in range(int(p["epochs"])):
        order = torch.tensor(rng.permutation(n))
        tot = 0.0
        for i in range(0, n, bs):
            b = order[i:i + bs]
            opt.zero_grad()
            loss = loss_fn(*(x[b] for x in inputs))
            loss.backward()
            opt.step()
            tot += loss.item() * len(b)
        hist.append(tot / n)
    net.eval()
    return hist


def make_captioner(torch: Any, d_in: int, hidden: int) -> Any:
    nn = torch.nn
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, len(COLOURS) + len(SHAPES)))


def train_captioner(image: np.ndarray, colour: np.ndarray, shape: np.ndarray, p: Mapping[str, Any]) -> Any:
    """A tiny MLP with two heads (colour, shape) trained on train images."""
    import torch

    seed = int(p["seed"])
    torch.manual_seed(seed)
    net = make_captioner(torch, image.shape[1], int(p["hidden"]))
    X = torch.tensor(image, dtype=torch.float32)
    C, S = torch.tensor(colour), torch.tensor(shape)
    ce = torch.nn.functional.cross_entropy
    nc = len(COLOURS)

    def loss(x: Any, c: Any, s: Any) -> Any:
        out = net(x)
        return ce(out[:, :nc], c) + ce(out[:, nc:], s)

    net.train()
    _train(torch, net, (X, C, S), loss, len(X), p, seed)
    return net


def predict_attributes(net: Any, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import torch

    with torch.no_grad():
        out = net(torch.tensor(image, dtype=torch.float32))
    nc = len(COLOURS)
    return out[:, :nc].argmax(1).numpy(), out[:, nc:].argmax(1).numpy()


def verbalise(colour: np.ndarray, shape: np.ndarray) -> list[str]:
    return [f"a {COLOURS[c]} {SHAPES[s]}" for c, s in zip(colour, shape)]


def caption(net: Any, image: np.ndarray) -> list[str]:
    """Self-captions of (possibly corrupted) images."""
    return verbalise(*predict_attributes(net, image))


def random_words(n: int, vocab: Sequence[str], rng: np.random.Generator) -> list[str]:
    """Arm (d): 'a <w1> <w2>', the length of a caption, words from a vocabulary with no attribute words."""
    w = rng.integers(0, len(vocab), (n, 2))
    return [f"a {vocab[i]} {vocab[j]}" for i, j in w]


class LateFusion:
    """Per modality Linear(d, hidden)+ReLU, concatenated, Linear(2·hidden, 2) — built lazily on torch."""

    def __init__(self, d_image: int, d_text: int, hidden: int, seed: int):
        import torch

        nn = torch.nn
        torch.manual_seed(seed)
        self.torch = torch
        self.img = nn.Sequential(nn.Linear(d_image, hidden), nn.ReLU())
        self.txt = nn.Sequential(nn.Linear(d_text, hidden), nn.ReLU())
        self.head = nn.Linear(2 * hidden, 2)
        self.net = nn.ModuleDict({"img": self.img, "txt": self.txt, "head": self.head})

    def logits(self, xv: Any, xt: Any) -> Any:
        return self.head(self.torch.cat([self.img(xv), self.txt(xt)], 1))

    def fit(self, xv: np.ndarray, xt: np.ndarray, y: np.ndarray, p: Mapping[str, Any], seed: int) -> list[float]:
        torch = self.torch
        V, T, Y = (torch.tensor(xv, dtype=torch.float32), torch.tensor(xt, dtype=torch.float32), torch.tensor(y))
        ce = torch.nn.functional.cross_entropy
        self.net.train()
        return _train(torch, self.net, (V, T, Y), lambda v, t, yy: ce(self.logits(v, t), yy), len(Y), p, seed)

    def predict(self, xv: np.ndarray, xt: np.ndarray) -> np.ndarray:
        torch = self.torch
        with torch.no_grad():
            out = self.logits(torch.tensor(xv, dtype=torch.float32), torch.tensor(xt, dtype=torch.float32))
        return out.argmax(1).numpy()
