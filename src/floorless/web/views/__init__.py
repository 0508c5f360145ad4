"""Pages, one module per feature."""
