"""A probe's result as a table for people and JSON for machines, and its exit status."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from floorless.doctor.report import text_table
from floorless.probe.run import ClassResult, Result

EXIT_MEASURED = 0
EXIT_INCOMPLETE = 1  # a page class could not be found or did not answer with a success
EXIT_UNKNOWN = 3  # nothing measured: bad input, an unreachable URL


def exit_code(result: Result) -> int:
    found = {r.page.key for r in result.classes}
    missing = [p for p in result.plan.pages if p.key not in found]
    if missing or not all(r.ok for r in result.classes) or result.floor_ms() is None:
        return EXIT_INCOMPLETE
    return EXIT_MEASURED


def _short(url: str, base: str) -> str:
    if url.startswith(base):
        return "/" + url[len(base) :]
    parts = urlsplit(url)
    return url if parts.netloc != urlsplit(base).netloc else parts.path


def _statuses(result: ClassResult) -> str:
    shown = [
        f"{status}" if n == len(result.ms) else f"{status}x{n}"
        for status, n in result.statuses.most_common()
    ]
    if result.errors:
        shown.append(f"{len(result.errors)} failed")
    return ", ".join(shown) or "-"


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) and abs(value) >= 10 else f"{value:.1f}"


def to_text(result: Result) -> str:
    plan = result.plan
    what = plan.kind if plan.kind != "unknown" else "forge not recognised"
    repo = f", repository {plan.repository}" if plan.repository else ""
    lines = [
        f"floorless probe: {plan.base} ({what}){repo}",
        f"{result.rounds} rounds of sequential requests in {result.seconds:.1f} s",
        "",
    ]
    rows = [["page", "URL", "n", "p50 ms", "p95 ms", "status"]]
    measured = {r.page.key: r for r in result.classes}
    for page in plan.pages:
        r = measured.get(page.key)
        if r is None:
            rows.append([page.label, f"({page.note})", "0", "-", "-", "-"])
            continue
        url = _short(page.url or "", plan.base)
        if not r.measured:
            rows.append([page.label, url, "0", "-", "-", _statuses(r)])
            continue
        rows.append([page.label, url, str(len(r.ms)), f"{r.p50:.1f}", f"{r.p95:.1f}", _statuses(r)])
    lines += text_table(rows, right={2, 3, 4})

    floor = result.floor_ms()
    base = result.baseline()
    lines.append("")
    if floor is None or base is None:
        lines.append(
            "floor: not measured (it needs a repository page and a non-repository page that "
            "answer with a success)"
        )
    else:
        lines.append(
            f"floor: {floor:.1f} ms (the fastest repository page's p50 minus the "
            f"{base.page.label}'s p50)"
        )
        for r in result.classes:
            if r.page.in_repository and r.ok:
                lines.append(f"  {r.page.label:<14} +{max(0.0, r.p50 - base.p50):.1f} ms")

    metrics: list[str] = []
    for r in result.classes:
        metrics += [m for m in r.server_timing if m not in metrics]
    if metrics:
        lines += ["", "Server-Timing, medians as the server reports them (ms; spawn: processes)"]
        rows = [["page", *metrics]]
        for r in result.classes:
            medians = r.timing_medians()
            rows.append(
                [r.page.label, *(_number(medians[m]) if m in medians else "-" for m in metrics)]
            )
        lines += text_table(rows, right=set(range(1, len(metrics) + 1)))
    else:
        lines += ["", "No Server-Timing header: the server does not say where its time goes."]
    return "\n".join(lines) + "\n"


def to_json(result: Result) -> str:
    measured = {r.page.key: r for r in result.classes}
    classes: list[dict[str, Any]] = []
    for page in result.plan.pages:
        r = measured.get(page.key)
        entry: dict[str, Any] = {
            "class": page.key,
            "label": page.label,
            "url": page.url,
            "note": page.note,
            "repository_page": page.in_repository,
        }
        if r is not None:
            entry.update(
                {
                    "n": len(r.ms),
                    "ok": r.ok,
                    "p50_ms": round(r.p50, 3) if r.measured else None,
                    "p95_ms": round(r.p95, 3) if r.measured else None,
                    "ms": [round(v, 3) for v in r.ms],
                    "statuses": {str(k): v for k, v in sorted(r.statuses.items())},
                    "errors": r.errors,
                    "server_timing_medians": {
                        k: round(v, 3) for k, v in r.timing_medians().items()
                    },
                }
            )
        classes.append(entry)
    floor = result.floor_ms()
    base = result.baseline()
    document = {
        "base": result.plan.base,
        "kind": result.plan.kind,
        "repository": result.plan.repository,
        "branch": result.plan.branch,
        "rounds": result.rounds,
        "seconds": round(result.seconds, 3),
        "floor_ms": None if floor is None else round(floor, 3),
        "baseline_class": None if base is None else base.page.key,
        "classes": classes,
        "exit_code": exit_code(result),
    }
    return json.dumps(document, indent=2)
