"""Security headers on every answer, and a Content-Security-Policy on every HTML page.

The pages need no more than the policy allows: one script and two stylesheets of our own
(``/-/static``), ``fetch`` back to this site (the last-commit column), forms posted here, and
images from anywhere (a README may show a badge hosted elsewhere) or ``data:`` (the empty
favicon). No inline script, style or ``style`` attribute exists in a template, so none is
allowed, and rendered Markdown (sanitised by nh3, which keeps no ``style``) adds none.
A view that sets its own policy (raw files: ``sandbox``) keeps it.
"""

from __future__ import annotations

import falcon

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src * data:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
ALWAYS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # a private repository's URL never leaves the site
}


class SecurityHeadersMiddleware:
    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        for name, value in ALWAYS.items():
            if resp.get_header(name) is None:
                resp.set_header(name, value)
        html = (resp.content_type or "").startswith("text/html")
        if html and resp.get_header("Content-Security-Policy") is None:
            resp.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
