"""Revela: self-supervised retriever training through language modelling with in-batch attention."""
