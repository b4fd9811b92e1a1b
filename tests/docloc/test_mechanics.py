"""The fixed-potential rerun (spec §5): pages, localisers, and the flow's locality."""

import numpy as np

from paperflow.docloc.mechanics import block_accuracy, pages, run

P = {"grid": 16, "pages": 6, "blocks": 6, "noise": 0.0, "prior_sigma": 0.08, "offsets": [0.0], "taus": [0.005],
     "ks": [1, 2], "eps": 0.01, "beta": 0.2, "iters": 20, "seed": 0, "judge_tau": 0.005, "judge_k": 2}


def test_pages_have_one_evidence_block_and_a_prior_on_it():
    V, ids, prior = pages(P, 0.0)
    assert V.shape == ids.shape == prior.shape == (6, 16, 16)
    assert np.allclose(prior.sum((1, 2)), 1.0)
    for i in range(6):
        assert (V[i][ids[i] == 0] == -1.0).all()  # noise 0: the evidence has relevance 1, others 0
        assert prior[i][ids[i] == 0].mean() > prior[i][ids[i] > 0].mean()


def test_noise_free_localisers_find_the_evidence():
    res = run(P)["per_page"]["0"]
    assert np.mean(res["gibbs"]) == 1.0 and np.mean(res["poe"]) == 1.0 and np.mean(res["jko_t0.005_K2"]) == 1.0
    ids = np.array([[[0, 0, 1, 1]] * 4])
    on_other = np.where(ids == 1, 0.2, 0.05)
    assert block_accuracy(on_other, ids, 2).tolist() == [0.0]
    assert block_accuracy(on_other[:, :, ::-1].copy(), ids, 2).tolist() == [1.0]
