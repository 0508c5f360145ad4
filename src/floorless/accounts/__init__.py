"""Who is asking and what they may do: users, organisations, tokens and sessions, and the one
access policy.
"""
