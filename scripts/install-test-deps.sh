#!/usr/bin/env bash
# Install the Debian packages the test-suite needs (git for the fixture repositories,
# chromium and chromium-driver for the browser tests), only those that are missing.
# Idempotent: a machine that already has them is left untouched and nothing is fetched.
# Python packages are installed separately (pip install -e '.[test]').
set -euo pipefail

packages=(git chromium chromium-driver)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [ "$status" != "install ok installed" ]; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-test-deps: missing ${missing[*]}; run this script as root" >&2
    exit 1
  fi
else
  sudo=()
fi

echo "install-test-deps: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q "${missing[@]}"
