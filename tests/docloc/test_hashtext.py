from __future__ import annotations

import numpy as np

from paperflow.nn.hashtext import embed_word, embed_words


def test_hashtext_is_deterministic_normalised_and_word_specific():
    a, b = embed_word("Total", 16), embed_word("total!", 16)
    assert np.array_equal(a, b) and abs(float(np.linalg.norm(a)) - 1) < 1e-6
    assert abs(float(embed_word("total", 16) @ embed_word("amount", 16))) < 0.9
    assert not np.array_equal(embed_word("total", 16, seed=0), embed_word("total", 16, seed=1))
    m = embed_words(["what", "is", "the", "total"], 16, drop_stopwords=True)
    assert np.allclose(m, a)
    assert not embed_words(["the", "of"], 8, drop_stopwords=True).any()
