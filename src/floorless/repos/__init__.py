"""Repositories as the forge keeps them: the registry in the database, the directory scan, crash-
safe intents, each repository's live state, garbage collection.
"""
