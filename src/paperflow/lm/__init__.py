"""Shared causal-LM utilities: the offline SmolLM2-135M checkpoint, a stdlib-docstring English
corpus in WikiText raw layout, and a tiny Llama builder for seconds-scale test configs."""
