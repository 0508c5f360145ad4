"""Code search: a trigram index of each repository's default branch, kept in the database."""
