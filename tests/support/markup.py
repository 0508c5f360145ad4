"""A repository of documents in every markup the forge renders, for the rendering tests."""

from __future__ import annotations

import json
from pathlib import Path

from support.gitfixtures import FastImportStream, _init_bare


def _notebook() -> dict:
    return {
        "nbformat": 4,
        "metadata": {"kernelspec": {"language": "python"}},
        "cells": [
            {"cell_type": "markdown", "source": ["# Analysis\n", "See [data](data.csv)."]},
            {
                "cell_type": "code",
                "execution_count": 3,
                "source": ["import sys\n", "print(1)"],
                "outputs": [
                    {"output_type": "stream", "text": ["1\n", "<b>2</b>\n"]},
                    {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=\n"}},
                    {
                        "output_type": "display_data",
                        "data": {"image/svg+xml": "<svg onload='alert(1)'/>", "text/plain": "fig"},
                    },
                    {
                        "output_type": "execute_result",
                        "data": {
                            "text/html": "<table><tr><td onclick='x'>1</td></tr></table>"
                            "<script>alert(2)</script>"
                        },
                    },
                    {
                        "output_type": "error",
                        "ename": "E",
                        "evalue": "v",
                        "traceback": ["\x1b[31mTraceback\x1b[0m <x>"],
                    },
                ],
            },
            {"cell_type": "raw", "source": "<script>alert(3)</script>"},
            {"cell_type": "markdown", "source": "# Analysis"},
        ],
    }


# If any of its script ran, the page's title would change and a request for /pwned-... go out.
SVG = b"""<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"
 onload="document.title='pwned-onload'; fetch('/pwned-onload')">
<script>document.title='pwned-script'; fetch('/pwned-script');
top.document.title='pwned-top'</script>
<image href="x.png" width="1" height="1" onerror="fetch('/pwned-onerror')"/>
<rect width="40" height="40" fill="#c33"/></svg>
"""


DOC_FILES: dict[str, bytes] = {
    "README.md": b"# Demo docs\n\nSee [the guide](docs/guide.md).\n\n![logo](logo.svg)\n",
    "logo.svg": SVG,
    "docs/README.rst": b"Docs\n====\n\nThe *docs* directory. See `guide <guide.md>`_.\n",
    "docs/guide.md": b"# Guide\n\n## Usage\n\n[back](../README.md) ![logo](../logo.svg)\n\n"
    b"```python\nx = 1\n```\n",
    "docs/data.csv": b"a,b\n1,2\n",
    "docs/nb.ipynb": json.dumps(_notebook()).encode(),
    "docs/sub/README.md": b"# Deep\n\n[up](../guide.md)\n",
    "manual/README.adoc": b"= Manual\n\nSee link:git-add.adoc[git add].\n",
    "manual/git-add.adoc": b"git-add(1)\n==========\n\nNAME\n----\ngit-add - add\n",
}


def build_docs(path: Path) -> Path:
    _init_bare(path)
    stream = FastImportStream()
    stream.commit("refs/heads/main", "Documents", files=dict(DOC_FILES))
    stream.run(path)
    return path
