"""The one exception tree of floorless, and the HTTP status each branch maps to.

    FloorlessError
    ├── ConfigError              bad settings; the command line reports it and exits
    ├── DiagnosisError           doctor or probe cannot measure what was asked (a missing
    │                            app.ini, no git, an unreachable URL); reported, exit 3
    ├── NotFound (404)           unknown owner, repository, ref, path or object
    │   └── UnknownRevision      a ref or commit id that does not resolve
    ├── BadRequest (400)         input that can never be valid: NUL, overlong, bad cursor
    │   ├── TooLarge (413)       a request body over its limit
    │   └── Unsupported (415)    a content type or encoding floorless does not take
    ├── Unauthorized (401)       credentials missing or wrong where they are needed
    ├── Forbidden (403)          signed in, allowed to see, not allowed to do
    ├── Conflict (409)           a name already taken
    ├── Throttled (429)          too many failed sign-ins; ``retry_after`` seconds
    │   └── Busy (503)           every slot of a bounded kind of work is taken (password
    │                            checks, git children for downloads); try again soon
    ├── RepositoryBroken (503)   a repository git cannot read; other repositories keep working
    ├── DatabaseUnavailable (503) the database cannot be reached; pages served from memory
    │                            keep working, and it is tried again at the next request
    └── GitCommandError (502)    a git child exited non-zero (archive, blame)

The web layer maps these to statuses in exactly one place (``web/errors.py``).
"""

from __future__ import annotations


class FloorlessError(Exception):
    """Base of every error floorless raises on purpose."""

    status = 500


class ConfigError(FloorlessError):
    """A setting is missing, malformed or out of range."""


class DiagnosisError(FloorlessError):
    """``floorless doctor`` or ``floorless probe`` cannot do what was asked."""


class NotFound(FloorlessError):
    status = 404


class UnknownRevision(NotFound):
    pass


class BadRequest(FloorlessError):
    status = 400


class TooLarge(BadRequest):
    status = 413


class Unsupported(BadRequest):
    status = 415


class Unauthorized(FloorlessError):
    status = 401


class Forbidden(FloorlessError):
    status = 403


class Conflict(FloorlessError):
    status = 409


class Throttled(FloorlessError):
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Busy(Throttled):
    """Every slot of a bounded kind of work (password checks, git children sending a
    download) is taken: answered at once rather than queued."""

    status = 503


class RepositoryBroken(FloorlessError):
    status = 503


class DatabaseUnavailable(FloorlessError):
    status = 503


class GitCommandError(FloorlessError):
    status = 502
