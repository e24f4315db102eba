#!/usr/bin/env bash
# Fetch the jars of Delta Lake's Spark connector named in pom.xml into jars/ (from Maven Central, with mvn).
# Installs Debian's maven when mvn is missing and apt-get can be used; otherwise says what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mvn >/dev/null 2>&1; then
  if ! bash scripts/apt-install.sh "to fetch Delta's jars" maven; then
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
