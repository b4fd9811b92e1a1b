"""Hydra-Nav (spec vision_language_b.md §8): adaptive slow/fast triggering for object navigation in
a gridworld of typed rooms; a reconstruction from the paper's abstract."""
