"""TWLA W1.58A4 post-training quantization (spec ../shared/specs/quantization.md) as a reusable stage."""
