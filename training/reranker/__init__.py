"""Trainer of cross-encoder rerankers (`vela train reranker`), tevatron-style: arguments, dataset,
collator, the HF Trainer with an InfoNCE loss, and build/load of the model."""
