"""The history index: built in the background from git, kept as packed rows, and what the refs
reach.
"""
