"""The bottom layer: errors, settings, caches, timing, background work, the heap, metrics and
dates; it imports nothing of floorless.
"""
