#!/usr/bin/env bash
# apt-install.sh WHY PACKAGE...: install Debian packages with apt-get, as root or with password-less sudo.
# Exits 1 (installing nothing) when neither apt-get nor the rights are there, for the caller to say what to do.
set -euo pipefail
why="$1"; shift

command -v apt-get >/dev/null 2>&1 || exit 1
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo_cmd="sudo -n"; else exit 1; fi
fi
echo "Installing $* ($why) with apt-get..." >&2
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq >/dev/null
$sudo_cmd apt-get install -y -qq "$@" >/dev/null
