"""Everything that touches git: in-process object access through libgit2, and git children.

Names (refs, paths) are ``bytes`` throughout this package; the web layer decodes them only to
show them.
"""
