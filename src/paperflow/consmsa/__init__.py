"""consmsa: intra-/inter-modality consistency score (I²CS) for multimodal sentiment analysis
(spec vision_language_a.md §4). The score and its uses are a reconstruction: no code or equations were public."""
