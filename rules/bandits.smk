# bandits rules (being written)
