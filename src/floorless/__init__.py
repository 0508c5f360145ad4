"""floorless: a self-hosted git forge whose repository pages have no latency floor."""

__version__ = "0.1.0"
