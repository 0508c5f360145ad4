#!/usr/bin/env bash
# Install the Debian packages the test-suite needs (git for the fixture repositories,
# chromium and chromium-driver for the browser tests), only those that are missing.
# Python packages are installed separately (pip install -e '.[test]').
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-missing.sh" install-test-deps git chromium chromium-driver
