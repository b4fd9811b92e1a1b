"""The NLI judge, wired to a local model directory (paper scale uses a real NLI checkpoint by path).

A tiny BERT sequence classifier is built here with fixed weights whose decision is set by the
classifier bias, so the test checks the judge's plumbing: ROUGE gate first, label names read from
`id2label` (any order, any case), entailment = leak, scores reported."""

from __future__ import annotations

import pytest
import torch

from paperflow.unlearning.judge import make_judge


def _tiny_nli(path, id2label: dict[int, str], winner: str) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "author", "was", "born", "in",
                                         "paris", "rome", "1970", "wrote", "novels"])}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                  sep_token="[SEP]")
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=64, num_labels=len(id2label),
                     id2label=id2label, label2id={v: k for k, v in id2label.items()})
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.fill_(-5.0)
        model.classifier.bias[[k for k, v in id2label.items() if v == winner][0]] = 5.0
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


ROW = {"answer": "The author was born in Paris in 1970."}


@pytest.mark.parametrize("id2label", [{0: "entailment", 1: "neutral", 2: "contradiction"},
                                      {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}])
def test_nli_judge_entailment_is_a_leak(tmp_path, id2label):
    ent = [v for v in id2label.values() if v.lower() == "entailment"][0]
    judge = make_judge("nli", gate=0.1, nli_model=_tiny_nli(tmp_path / "m", id2label, ent))
    lab, sc = judge("the author was born in paris in 1970", ROW)
    assert lab == 1 and sc["entail"] > 0.99 and sc["rougeL_recall"] > 0.9
    # the ROUGE gate comes first: an unrelated response is never a leak, whatever the model says
    lab, sc = judge("wrote novels", ROW)
    assert lab == 0 and sc["entail"] == 0.0 and sc["rougeL_recall"] < 0.1


def test_nli_judge_contradiction_is_not_a_leak(tmp_path):
    id2label = {0: "entailment", 1: "neutral", 2: "contradiction"}
    judge = make_judge("nli", gate=0.1, nli_model=_tiny_nli(tmp_path / "m", id2label, "contradiction"))
    lab, sc = judge("the author was born in rome in 1970", ROW)
    assert lab == 0 and sc["entail"] < 0.01 and sc["rougeL_recall"] >= 0.1


def test_nli_judge_needs_a_model_path():
    with pytest.raises(ValueError, match="nli_model"):
        make_judge("nli", gate=0.1, nli_model=None)
