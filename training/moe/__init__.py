"""`vela train moe`: upcycle a dense encoder into a sparse MoE embedder and train it contrastively."""
