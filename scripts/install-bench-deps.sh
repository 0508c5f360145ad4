#!/usr/bin/env bash
# Install what the benchmark needs, only what is missing:
#   Debian: fuse3 (libfuse3 + fusermount3, for the slow-filesystem simulator bench/slowfs.py)
#           and the peers it is compared with: cgit, gitweb, nginx, fcgiwrap, wrk;
# The PyPI packages (mfusepy, klaus, gunicorn) are the `bench` extra in pyproject.toml.
# Idempotent: a machine that already has them is left untouched and nothing is fetched;
# apt-get update runs once, and only when something must be installed.
set -euo pipefail

debian=(fuse3 cgit gitweb nginx fcgiwrap wrk)

missing=()
for pkg in "${debian[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [ "$status" != "install ok installed" ]; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "install-bench-deps: missing ${missing[*]}; run this script as root" >&2
      exit 1
    fi
  else
    sudo=()
  fi
  echo "install-bench-deps: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
