"""AsciiDoc documents, hostile and ordinary, in a repository built for the Asciidoctor tests
and the browser's rendering test."""

from __future__ import annotations

from pathlib import Path

from support.gitfixtures import FastImportStream, _init_bare

README = b"""= Demo Manual
:toc:

An *AsciiDoc* README: see link:docs/guide.adoc[the guide].

== Install

. Download it.
. Run it:
+
[source,python]
----
print("hello")  # <1>
----
<1> Says hello.

* one
** nested

TIP: Read the guide first.

[WARNING]
====
Mind the gap.
====

.Options
|===
|Name |Default

|colour |auto
|===
"""


GUIDE = b"""= Guide

[[setup]]
== Setting up

Back to link:../README.adoc[the README], on to xref:other.adoc#part[the other page],
or to <<setup>>. A footnote.footnote:said[Said below.] The same again.footnote:said[]

image::img/logo.png[Logo]
"""


OTHER = b"= Other\n\n== Part\n\nText.\n"


HOSTILE = {
    "include.adoc": b"= Include\n\ninclude::/etc/passwd[]\n\ninclude::../../../secret.txt[]\n\n"
    b"include::{docdir}/../secret.txt[]\n",
    "attributes.adoc": b"= Attributes\n\nhome {env-HOME} {user-home} dir {docdir} file "
    b"{docfile} out {outdir} cwd {env-PWD} path {env-PATH}\n",
    "ifeval.adoc": b"= Ifeval\n\nifeval::[{sectnumlevels} > `touch /tmp/floorless-adoc-pwned`]\n"
    b'yes\nendif::[]\nifeval::["{user-home}" == "/root"]\nroot home\nendif::[]\n',
    "passthrough.adoc": b"= Pass\n\npass:[<script>alert(1)</script>] "
    b"+++<img src=x onerror=alert(2)>+++\n\n++++\n<script>alert(3)</script>\n"
    b"<div onclick=alert(4)>x</div>\n++++\n",
    # ids of the page around the document: the about panel's, a line's, the file finder's
    "ids.adoc": b"= Ids\n\n[[finder-list]]\n== Finder list\n\n== Finder 2\n\n[[about-heading]]\n"
    b"== About\n\n[[finder-0]]zero [[L12]]twelve [[topics-help]]help\n",
    "links.adoc": b"= Links\n\nlink:javascript:alert(5)[x] link:++javascript:alert(6)++[y]\n\n"
    b"image::x.svg[onerror=alert(7),link=javascript:alert(8)]\n\n"
    b'image:x.png[title="a\\" onload=\\"alert(9)"]\n',
}


NESTED = "".join("*" * (1 + i % 5) + " item\n" for i in range(100_000)).encode()


TABLE = ("|===\n" + "|x " * 30_000 + "\n|===\n").encode()  # 90 KB, under the ceiling


DEEP = "".join("=" * (4 + n) + "\n" for n in range(60)).encode() + b"deep\n"  # 60 blocks


MANY = {f"many/doc{n}.adoc": f"= Document {n}\n\n== Part {n}\n\nText.\n".encode() for n in range(8)}


# 56 KB that keep Asciidoctor busy for a second or more (its inline macros backtrack)
SLOW = "link:x[" * 8_000


SLOW_DOCS = {f"slow/doc{n}.adoc": f"= Slow {n}\n\n{SLOW}\n".encode() for n in range(4)}


def build(path: Path) -> Path:
    _init_bare(path)
    files = {
        "README.adoc": README,
        "docs/guide.adoc": GUIDE,
        "docs/other.adoc": OTHER,
        "big/nested.adoc": NESTED,
        "big/table.adoc": TABLE,
        "big/deep.adoc": DEEP,
        **{f"hostile/{name}": text for name, text in HOSTILE.items()},
        **MANY,
        **SLOW_DOCS,
    }
    stream = FastImportStream()
    stream.commit("refs/heads/main", "AsciiDoc documents", files=files)
    stream.run(path)
    return path
