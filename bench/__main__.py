"""``python -m bench``: run the benchmark and write the table, the JSON and the docs page."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bench import report
from bench.harness import Options
from bench.run import parser, problem, run


def parse(argv: list[str]) -> tuple[Options, argparse.Namespace]:
    """The run's options, and where to write its results (``--json``, ``--docs``)."""
    found = parser(description=__doc__)
    found.add_argument("--json", type=Path, default=Path("bench-results.json"))
    found.add_argument(
        "--docs",
        type=Path,
        default=None,
        help="write the Markdown report here (docs/benchmarks.md)",
    )
    options = found.parse_args(argv, namespace=Options())
    outputs = argparse.Namespace(json=options.json, docs=options.docs)
    for name in vars(outputs):  # where the results go is not an option of the run
        delattr(options, name)
    wrong = problem(options)
    if wrong is not None:
        found.error(wrong)
    return options, outputs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options, args = parse(argv)
    results = run(options, log=lambda line: print(line, flush=True))
    print(report.table(results))
    command = "python -m bench " + shlex.join(argv)
    report.write(results, args.json, args.docs, command)
    print(f"\nwrote {args.json}" + (f" and {args.docs}" if args.docs else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
