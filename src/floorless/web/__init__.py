"""The web layer: pages, raw files, archives and feeds, over the core services."""
