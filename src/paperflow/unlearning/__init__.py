"""LLM unlearning under leak@k, with RULE (Reisizadeh et al., ICML 2026). See README.md."""
