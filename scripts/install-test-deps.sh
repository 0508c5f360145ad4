#!/usr/bin/env bash
# Install the Debian packages the test-suite needs, only those that are missing: git for the
# fixture repositories, chromium and chromium-driver for the browser tests, fuse3 (libfuse3
# and fusermount3) for the slow-filesystem simulator the slow-storage tests mount, postgresql
# for the second run of the suite (started by scripts/test-postgres.sh, no system service),
# nginx, haproxy and openssl for the shipped proxy configurations (deploy/nginx.conf,
# deploy/haproxy.cfg) run in front of two nodes.
# Python packages are installed separately (pip install -e '.[test,bench]').
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-missing.sh" install-test-deps \
  git chromium chromium-driver fuse3 postgresql nginx haproxy openssl
