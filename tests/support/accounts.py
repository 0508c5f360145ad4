"""A browser's cookie jar over the in-process client, the password every test account
has, and the CSRF token a form page carries: how the tests sign in and post forms."""

from __future__ import annotations

import re

import httpx
from falcon import testing

PASSWORD = "a long password"


FORM = "application/x-www-form-urlencoded"


class Browser:
    """A cookie jar over the in-process test client, as a browser would keep it."""

    def __init__(self, client: testing.TestClient) -> None:
        self.client = client
        self.cookies: dict[str, str] = {}
        self.headers: dict[str, str] = {}

    def _cookie_header(self) -> dict[str, str]:
        jar = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return {"Cookie": jar, **self.headers} if jar else dict(self.headers)

    def _keep(self, result: testing.Result) -> testing.Result:
        for name, cookie in result.cookies.items():
            if cookie.value and (cookie.max_age is None or cookie.max_age > 0):
                self.cookies[name] = cookie.value
            else:
                self.cookies.pop(name, None)
        return result

    def get(self, path: str, **kwargs) -> testing.Result:
        return self._keep(self.client.simulate_get(path, headers=self._cookie_header(), **kwargs))

    def post(self, path: str, fields: dict[str, str], csrf: str | None = "page") -> testing.Result:
        if csrf == "page":  # the token the form page carries, as a browser would send it
            page = self.get(path if not path.startswith("/-/login") else "/-/login")
            csrf = csrf_of(page.text)
        body = "&".join(
            f"{k}={v}"
            for k, v in ({"csrf": csrf, **fields} if csrf is not None else fields).items()
        )
        headers = {**self._cookie_header(), "Content-Type": FORM}
        return self._keep(self.client.simulate_post(path, body=body, headers=headers))

    def post_files(
        self,
        path: str,
        fields: dict[str, str | list[str]],
        files: list[tuple[str, bytes]],
        field: str = "files",
        csrf: str | None = "page",
    ) -> testing.Result:
        """A ``multipart/form-data`` post, as a browser sends a form with file inputs: the
        token first, the fields in their order, then each file of the input ``field``."""
        if csrf == "page":
            csrf = csrf_of(self.get(path).text)
        data: dict[str, str | list[str]] = {"csrf": csrf, **fields} if csrf is not None else fields
        request = httpx.Request(
            "POST",
            "http://testserver" + path,
            data=data,
            files=[(field, (name, content, "application/octet-stream")) for name, content in files],
        )
        headers = {**self._cookie_header(), "Content-Type": request.headers["content-type"]}
        return self._keep(self.client.simulate_post(path, body=request.read(), headers=headers))

    def sign_in(self, name: str, password: str = PASSWORD) -> testing.Result:
        return self.post("/-/login", {"name": name, "password": password})


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)
