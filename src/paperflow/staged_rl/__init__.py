"""staged_rl: staged perception → text → visual reasoning RL (spec vision_language_b §6)."""
