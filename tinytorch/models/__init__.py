"""Models assembled from the engine: the transformer family."""
