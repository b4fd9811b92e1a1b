"""mi_gate — Self-Captioning Multimodal Interaction Tuning: LSMI interaction estimator + Multimodal
Interaction Gate on a synthetic interaction world (spec vision_language_b.md §9)."""
