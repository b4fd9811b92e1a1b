"""BLCE / BLCE-G: linear contextual bandits with O(log log T) parameter updates (reconstruction)."""
