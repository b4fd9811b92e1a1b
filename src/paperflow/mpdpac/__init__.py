"""MPD-PAC study: Mask Prior Suppression + Monotonic RoPE Scaling on a tiny masked-diffusion captioner."""
