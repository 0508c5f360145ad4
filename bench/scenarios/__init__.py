"""Every scenario ``python -m bench`` runs, in the order the report shows them.

A scenario is a module here that ends with ``SCENARIO = Scenario(...)`` (``bench.harness``):
its flags, its run and its part of the report. To add one, write its module and add its line
below; nothing else names it.
"""

from __future__ import annotations

from bench.harness import Scenario
from bench.scenarios import api, clones, cold, finder, pages, real, search

REGISTRY: list[Scenario] = [
    pages.SCENARIO,  # local, slow
    api.SCENARIO,
    cold.SCENARIO,
    real.SCENARIO,
    search.SCENARIO,
    finder.SCENARIO,
    clones.SCENARIO,
]
