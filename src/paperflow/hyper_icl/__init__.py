"""hyper_icl: Hyper-ICL (attention calibration with hyperbolic anchor distillation for multimodal ICL),
spec vision_language_b §5. Everything beyond the abstract is a reconstruction ([recon])."""
