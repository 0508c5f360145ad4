"""``floorless probe``: measure any running forge's latency floor from outside.

It finds one page of each class on the forge (``discover``: a repository's home, a raw file,
its commits, a page outside any repository, a static asset), times them over repeated
sequential requests with a small HTTP client (``client``), and reports p50/p95 per class,
the floor (repository pages minus the non-repository page) and the server's own
``Server-Timing`` breakdown when it sends one (``run``, ``report``). It works on floorless,
Forgejo, Gitea and cgit, and on anything else whose URLs it is given.
"""

from floorless.probe.client import Client
from floorless.probe.discover import plan
from floorless.probe.run import run

__all__ = ["Client", "plan", "run"]
