#!/usr/bin/env bash
# Install the Debian packages the test-suite needs, only those that are missing: git for the
# fixture repositories, chromium and chromium-driver for the browser tests, fuse3 (libfuse3
# and fusermount3) for the slow-filesystem simulator the slow-storage tests mount, postgresql
# for the second run of the suite (started by scripts/test-postgres.sh, no system service),
# nginx, haproxy and openssl for the shipped proxy configurations (deploy/nginx.conf,
# deploy/haproxy.cfg) run in front of two nodes, nodejs and npm to fetch axe-core, asciidoctor
# (Ruby) for the AsciiDoc worker, openssh-client and openssh-server for git over SSH (the
# tests start their own sshd on loopback, never the system's service), git-lfs for the
# Git LFS tests (the real client against the forge).
# Then axe-core (pinned) from npm into .cache/axe/ of the checkout: the accessibility browser
# test (tests/browser/test_browser_a11y.py) injects its axe.min.js into each page it checks.
# Python packages are installed separately (pip install -e '.[test,bench]').
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/apt-install-missing.sh" install-test-deps \
  git chromium chromium-driver fuse3 postgresql nginx haproxy openssl nodejs asciidoctor \
  openssh-client openssh-server git-lfs
# Debian's nodejs comes without npm (another build of nodejs may bring its own)
command -v npm >/dev/null || bash "$root/scripts/apt-install-missing.sh" install-test-deps npm
AXE_VERSION=4.11.0
axe_dir="$root/.cache/axe"
if [ ! -f "$axe_dir/node_modules/axe-core/axe.min.js" ] \
  || ! grep -q "\"version\": \"$AXE_VERSION\"" "$axe_dir/node_modules/axe-core/package.json"; then
  mkdir -p "$axe_dir"
  npm install --silent --no-audit --no-fund --no-save --prefix "$axe_dir" "axe-core@$AXE_VERSION"
fi
