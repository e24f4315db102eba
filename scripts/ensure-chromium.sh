#!/usr/bin/env bash
# A Chromium for the browser tests of `mv ui` (tests/system/test_ui.py, Playwright): the system's, Playwright's own
# download when its CDN is reachable, or Debian's `chromium` package installed with apt-get.
set -euo pipefail
venv_python="${1:-.venv/bin/python}"

if [ -n "${MV_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if "$venv_python" -m playwright install chromium >/dev/null 2>&1; then
  exit 0
fi
if bash "$(dirname "$0")/apt-install.sh" "a browser for the tests of mv ui" chromium; then
  exit 0
fi
echo "No Chromium for the browser tests of mv ui: install one (Debian/Ubuntu: apt-get install chromium)," \
     "or set MV_CHROMIUM to its path; tests/system/test_ui.py skips its browser test until then." >&2
