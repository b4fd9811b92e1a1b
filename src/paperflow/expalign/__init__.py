"""ExpAlign: expectation-alignment head, top-K multi-positive loss and GACO for open-vocabulary grounding."""
