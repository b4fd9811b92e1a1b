"""PIAA: training-free multi-label recognition by patch-level inference and adaptive aggregation."""
