"""Model building blocks several studies share (a study's own model stays in its package).

- `paperflow.nn.transformer`: a small pre-norm transformer with RoPE, causal or bidirectional, with
  hooks for per-layer hidden states, attention maps and the rotary tables.
- `paperflow.nn.vision`: a tiny CLIP-style ViT image tower ([CLS] + patch tokens; SCLIP / ClearCLIP
  last-block swaps), a text encoder, the symmetric InfoNCE loss, a resumable training loop, modality gap and
  multi-label mAP.
- `paperflow.nn.hashtext`: hashed word embeddings (a fixed random unit vector per word; no vocabulary).
- `paperflow.nn.grpo`: group-relative policy gradients for the tiny RL tier (advantages, PPO-clip surrogate,
  k3 KL to a reference).
- `paperflow.nn.trl_grpo`: the paper-scale RL path, TRL's `GRPOTrainer` on an HF causal LM with our rewards.
"""
