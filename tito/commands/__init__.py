"""tito command groups, one per file."""
