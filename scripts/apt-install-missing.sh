#!/usr/bin/env bash
# Install the Debian packages named as arguments that are not installed yet; nothing else.
# Idempotent: when all are present nothing is fetched; apt-get update runs once, only when
# something must be installed. Used by install-test-deps.sh and install-bench-deps.sh.
set -euo pipefail

who=$1
shift

missing=()
for pkg in "$@"; do
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
    echo "$who: missing ${missing[*]}; run this script as root" >&2
    exit 1
  fi
else
  sudo=()
fi

echo "$who: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q "${missing[@]}"
