"""Video-BCI: critical integration of self-prior hypotheses with DUS/PTS rewards (spec vision_language_b §7; reconstruction)."""
