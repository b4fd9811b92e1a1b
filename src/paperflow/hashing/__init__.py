"""Noisy-label cross-modal hashing: label-noise injection with verifiable records, RFCMH and
baselines, Hamming-ranking mAP. Spec: specs/hashing.md; method notes: README.md here."""
