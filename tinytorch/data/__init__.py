"""Data pipelines: datasets and loaders."""
