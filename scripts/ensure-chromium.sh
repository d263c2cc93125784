#!/usr/bin/env bash
# Makes sure Debian's chromium is installed at /usr/bin/chromium, for the test
# that looks at the Temporal Web UI through a headless browser
# (test/test-ui.test.ts). Quiet and instant when it is already there; as root
# it installs the Debian package; otherwise it says what to do and fails.
# No browser is ever downloaded from anywhere else.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [[ -x "$CHROMIUM" ]]; then
  exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "ensure-chromium: $CHROMIUM is missing and this is not root; install Debian's chromium: sudo apt-get install -y --no-install-recommends chromium" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $CHROMIUM is missing and apt-get is not available; install Debian's chromium package" >&2
  exit 1
fi

log=$(mktemp "${TMPDIR:-/tmp}/ensure-chromium.XXXXXX")
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q >"$log" 2>&1 ||
  ! apt-get install -y -q --no-install-recommends chromium >>"$log" 2>&1; then
  cat "$log" >&2
  echo "ensure-chromium: installing Debian's chromium failed (output above); the UI test needs $CHROMIUM" >&2
  exit 1
fi
if [[ ! -x "$CHROMIUM" ]]; then
  cat "$log" >&2
  echo "ensure-chromium: the chromium package installed but $CHROMIUM is still missing" >&2
  exit 1
fi
