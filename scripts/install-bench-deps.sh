#!/usr/bin/env bash
# Install the Debian packages the benchmark needs, only those that are missing: fuse3
# (libfuse3 + fusermount3, for the slow-filesystem simulator bench/slowfs.py) and the peers
# it is compared with: cgit, gitweb, nginx, fcgiwrap, wrk. None of their services is
# started (the benchmark starts its own nginx on a free loopback port).
# The PyPI packages (mfusepy, klaus, gunicorn) are the `bench` extra in pyproject.toml.
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-missing.sh" install-bench-deps \
  fuse3 cgit gitweb nginx fcgiwrap wrk
