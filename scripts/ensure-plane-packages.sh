#!/usr/bin/env bash
# Makes sure the Debian packages the cluster-shaped dev plane needs are
# installed: haproxy (the load balancer in front of the API servers), openssl
# (the plane's CA and serving certificates) and iproute2 (`ip`: network
# namespaces, veth pairs, the bridge). Quiet and instant when they are there;
# as root it says what it installs and why, and installs the missing ones with
# apt-get; otherwise it says what to do and fails (`svm dev up` then falls
# back to the loopback shape). What `npm test` needs besides: scripts/preflight.ts.
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
missing=()
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "ensure-plane-packages: missing ${missing[*]} and this is not root; install them: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-plane-packages: missing ${missing[*]} and apt-get is not available; install those packages" >&2
  exit 1
fi

log=$(mktemp "${TMPDIR:-/tmp}/ensure-plane-packages.XXXXXX")
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
echo "ensure-plane-packages: installing ${missing[*]} from Debian with apt-get, for the cluster-shaped plane (haproxy: the load balancer in front of the API servers; openssl: its certificates; iproute2: its network namespaces)" >&2
if ! apt-get update -q >"$log" 2>&1 ||
  ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  cat "$log" >&2
  echo "ensure-plane-packages: installing ${missing[*]} failed (output above)" >&2
  exit 1
fi
for cmd in haproxy openssl ip; do
  if ! command -v "$cmd" >/dev/null 2>&1; then
    cat "$log" >&2
    echo "ensure-plane-packages: the packages installed but $cmd is still missing" >&2
    exit 1
  fi
done
