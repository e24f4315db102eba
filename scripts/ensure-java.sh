#!/usr/bin/env bash
# Make sure a Java runtime that Spark 4 accepts (17 or newer) is on the machine.
# Installs Debian's openjdk-17-jre-headless when apt-get can be used (apt-install.sh); otherwise says what to install.
set -euo pipefail

java_major() {
  local bin="$1"
  "$bin" -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

candidate=""
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
  candidate="$JAVA_HOME/bin/java"
elif command -v java >/dev/null 2>&1; then
  candidate="$(command -v java)"
fi

if [ -n "$candidate" ]; then
  major="$(java_major "$candidate" || true)"
  if [ -n "$major" ] && [ "$major" -ge 17 ]; then
    exit 0
  fi
  echo "Found Java ${major:-of unknown version} at $candidate; Spark 4 needs Java 17 or 21." >&2
fi

if bash "$(dirname "$0")/apt-install.sh" "Java 17, for Spark" openjdk-17-jre-headless; then
  exit 0
fi

cat >&2 <<'MSG'
Error: Spark needs Java 17 or 21, and none was found (nor could it be installed without root).
  Debian/Ubuntu:  sudo apt-get install openjdk-17-jre-headless
  Fedora/RHEL:    sudo dnf install java-17-openjdk-headless
  macOS:          brew install openjdk@17
Then run the make command again (or set JAVA_HOME to a Java 17+ installation).
MSG
exit 1
