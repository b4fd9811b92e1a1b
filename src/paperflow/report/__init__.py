"""Cross-study reporting (results/summary.md)."""
