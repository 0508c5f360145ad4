"""The benchmark's shape: a harness, scenarios that use it, and one registry of them.

Its imports point one way (the harness imports no scenario, no scenario imports another or the
registry), nothing imports in a circle, and every scenario in ``bench/scenarios/`` is in the
registry with its flags, its run and its part of the report: adding a scenario is its module
and its line in the registry."""

from __future__ import annotations

import argparse
from pathlib import Path

from support.imports import circles, graph

from bench import report
from bench import run as bench_run
from bench.harness import Report, Results, Scenario
from bench.scenarios import REGISTRY

BENCH = Path(__file__).resolve().parents[2] / "bench"
# the modules that may name the registry: the run, its report and its command line
ABOVE = {"bench.scenarios", "bench.run", "bench.report", "bench.__main__"}


def test_no_module_of_the_benchmark_imports_in_a_circle() -> None:
    assert circles(graph(BENCH)) == []


def test_only_the_run_and_its_report_use_the_scenarios() -> None:
    edges = graph(BENCH)
    users = {
        module
        for module, targets in edges.items()
        if any(t == "bench.scenarios" or t.startswith("bench.scenarios.") for t in targets)
    }
    assert users <= ABOVE
    assert not any(t in ABOVE or t.startswith("bench.scenarios") for t in edges["bench.harness"])
    for module, targets in edges.items():
        if module.startswith("bench.scenarios."):
            others = {t for t in targets if t.startswith("bench.scenarios")}
            assert others == set(), f"{module} imports {sorted(others)}"


def test_every_scenario_module_is_registered_with_flags_a_run_and_a_report() -> None:
    modules = {p.stem for p in (BENCH / "scenarios").glob("*.py")} - {"__init__"}
    registered = {s.run.__module__.rsplit(".", 1)[1] for s in REGISTRY}
    assert registered == modules, "a scenario module missing from the registry"
    names = [name for s in REGISTRY for name in s.names]
    assert len(names) == len(set(names))
    keys = [s.key for s in REGISTRY if s.key is not None]
    assert len(keys) == len(set(keys))
    for scenario in REGISTRY:
        assert isinstance(scenario, Scenario) and scenario.names and scenario.summary
        assert callable(scenario.arguments) and callable(scenario.run)
        assert isinstance(scenario.report, Report)
        assert callable(scenario.report.checks) and callable(scenario.report.section)
        if scenario.report.standalone is not None:  # spliced by its key's figures
            assert scenario.key is not None
            assert scenario.report.standalone.heading.startswith("## ")


def test_each_scenario_adds_its_own_flags() -> None:
    common = {a.dest for a in bench_run.parser()._actions}
    seen: set[str] = set()
    for scenario in REGISTRY:
        parser = argparse.ArgumentParser()
        before = {a.dest for a in parser._actions}
        scenario.arguments(parser)
        own = {a.dest for a in parser._actions} - before
        assert not own & seen, f"{scenario.names} repeats another scenario's flag"
        seen |= own
    assert seen <= common
    # every flag has a default, so that a run asked for in code needs none of them
    defaults = vars(bench_run.options())
    assert seen <= defaults.keys()


def test_a_run_without_a_scenario_says_nothing_of_it() -> None:
    nothing = Results(
        repo={"kind": "small", "commits": 1, "file": "f", "directory": "d", "history_path": "f"},
        options={**bench_run.options(scenarios=()).record(), "scenarios": []},
        runs=[],
        machine={"cores": "2", "cpu": "cpu", "kernel": "6", "python": "3", "git": "git"},
        started="today",
        seconds=1.0,
    )
    for scenario in REGISTRY:
        assert not nothing.ran(scenario)
        assert scenario.report.section(nothing, "c") == []
        assert scenario.report.table(nothing) == []
        assert scenario.report.intro(nothing) == []
        assert all(check.passed is None for check in scenario.report.checks(nothing))
    assert "## " not in report.markdown(nothing, "c").split("## Targets", 1)[1]
