#!/usr/bin/env bash
# Makes sure the Debian packages test/test-image.test.ts needs are installed:
# podman (builds the Dockerfile and runs the worker from the image), runc (the
# OCI runtime the test gives podman: Debian's crun 1.8, podman's default,
# refuses a hybrid cgroup v1/v2 layout) and mmdebstrap (makes the base image's
# root filesystem from Debian packages, since no registry image can be pulled
# here). Quiet and instant when they are there; as root it
# installs the missing ones with apt-get; otherwise it says what to do and
# fails (the image test then fails with that message).
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "ensure-image-tools: missing ${missing[*]} and this is not root; install them: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-image-tools: missing ${missing[*]} and apt-get is not available; install those packages" >&2
  exit 1
fi

log=$(mktemp "${TMPDIR:-/tmp}/ensure-image-tools.XXXXXX")
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
echo "ensure-image-tools: installing ${missing[*]} from Debian" >&2
if ! apt-get update -q >"$log" 2>&1 ||
  ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  cat "$log" >&2
  echo "ensure-image-tools: installing ${missing[*]} failed (output above)" >&2
  exit 1
fi
for cmd in podman runc mmdebstrap; do
  if ! command -v "$cmd" >/dev/null 2>&1; then
    cat "$log" >&2
    echo "ensure-image-tools: the packages installed but $cmd is still missing" >&2
    exit 1
  fi
done
