"""Training: vocabulary, word embeddings, losses and the training loop of the neural models."""
