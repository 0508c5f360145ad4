#!/usr/bin/env bash
# Install the Debian packages named as arguments that are not installed yet; nothing else.
# Idempotent: when all are present nothing is fetched; apt-get update runs once, only when
# something must be installed. Used by check, install-test-deps.sh and install-bench-deps.sh.
# It waits up to 10 minutes for another apt or dpkg to finish, and starts no service that a
# package would start (nginx would otherwise take port 80 where systemd runs).
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

# invoke-rc.d asks policy-rc.d whether a package may start its service: 101 says no
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 755 "$policy"
  own_policy=1
fi
cleanup() {
  if [ "$own_policy" = 1 ]; then
    "${sudo[@]}" rm -f "$policy"
  fi
}
trap cleanup EXIT

apt_get=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
echo "$who: installing ${missing[*]}"
"${apt_get[@]}" update -q
"${apt_get[@]}" install -y -q "${missing[@]}"
