"""``/api/v1``: Forgejo's REST API in its shapes (paths, parameters, JSON, statuses), so that
the tools written for Forgejo and Gitea work against floorless unchanged.

``base.py`` is what every resource shares (authentication is ``web/auth.py``'s, errors are
``web/errors.py``'s, access is ``access.py``'s), ``models.py`` the JSON of accounts and
repositories, ``routes.py`` the route table, ``openapi.py`` the description made from it.
"""
