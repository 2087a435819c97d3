"""Text: tokenizers and embeddings."""
