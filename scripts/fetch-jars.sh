#!/usr/bin/env bash
# Fetch the jars of Delta Lake's Spark connector named in pom.xml into jars/ (from Maven Central, with mvn).
# Installs Debian's maven when mvn is missing and apt-get can be used; otherwise says what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mvn >/dev/null 2>&1; then
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo_cmd="sudo -n"; fi
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo_cmd" ]; }; then
    echo "Installing Maven (to fetch Delta's jars) with apt-get..." >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get update -qq >/dev/null
    $sudo_cmd apt-get install -y -qq maven >/dev/null
  else
    cat >&2 <<'MSG'
Error: Maven (mvn) is needed to fetch Delta Lake's Spark connector, and none was found.
  Debian/Ubuntu:  sudo apt-get install maven
  macOS:          brew install maven
Then run the make command again. (Or put the jars pom.xml names into a folder and set MVENGINE_JARS to it.)
MSG
    exit 1
  fi
fi

rm -rf jars
# Quiet unless it fails (Maven prints colour resets even with -q).
if ! out="$(mvn -q -B dependency:copy-dependencies 2>&1)"; then
  echo "$out" >&2
  echo "Error: could not fetch Delta Lake's jars (pom.xml) from Maven Central; see Maven's output above." >&2
  exit 1
fi
ls jars/*.jar >/dev/null
