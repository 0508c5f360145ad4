"""Working together: issues, pull requests, reviews, triage, references, commit statuses, branch
protection, merges, forks and the hooks every push runs.
"""
