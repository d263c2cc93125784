#!/usr/bin/env bash
# Writes the root filesystem of a stand-in for the Dockerfile's base image
# (FROM node:20-bookworm-slim) as a tarball, for machines that cannot pull
# from a registry: Debian bookworm's Essential packages and libstdc++6 (what
# node links against) from the Debian mirror, made by mmdebstrap as root,
# without documentation, manual pages or locales (as Debian's slim images);
# the Node.js 20 and npm this machine runs, in /usr/local as the official
# image has them; and the official image's unprivileged user `node`
# (uid/gid 1000, home /home/node). Import it under the name the Dockerfile
# uses, then build with pulls off:
#
#   bash scripts/image-base.sh /tmp/node-base.tar
#   podman import --change 'CMD ["node"]' /tmp/node-base.tar docker.io/library/node:20-bookworm-slim
#   podman build --pull=never -t svm .
#
# MIRROR (default http://deb.debian.org) names the Debian mirror;
# test/test-image.test.ts runs it.
set -euo pipefail

out=${1:?usage: image-base.sh OUT.tar}
mirror=${MIRROR:-http://deb.debian.org}
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

node_bin=$(command -v node || true)
if [[ -z "$node_bin" ]]; then
  echo "image-base: no node on PATH: the image's Node.js is this machine's" >&2
  exit 1
fi
node_bin=$(readlink -f "$node_bin")
node_version=$("$node_bin" -p process.versions.node)
if [[ "${node_version%%.*}" != 20 ]]; then
  echo "image-base: this machine's node is $node_version; node:20-bookworm-slim needs Node.js 20" >&2
  exit 1
fi
npm_dir=$(readlink -f "$(dirname "$node_bin")/../lib/node_modules/npm")
if [[ ! -f "$npm_dir/bin/npm-cli.js" ]]; then
  echo "image-base: npm not found next to $node_bin (looked in $npm_dir)" >&2
  exit 1
fi
for cmd in mmdebstrap; do
  command -v "$cmd" >/dev/null 2>&1 || {
    echo "image-base: $cmd is missing (npm test installs it as root: scripts/preflight.ts)" >&2
    exit 1
  }
done

# force-unsafe-io: no fsync per unpacked file (the tarball is written once at the end).
mmdebstrap ${MMDEBSTRAP_VERBOSE:---quiet} --variant=essential --include=libstdc++6 --mode=root --format=tar \
  --dpkgopt=force-unsafe-io \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="mkdir -p \"\$1/usr/local/bin\" \"\$1/usr/local/lib/node_modules\" && cp '$node_bin' \"\$1/usr/local/bin/node\" && cp -a '$npm_dir' \"\$1/usr/local/lib/node_modules/npm\"" \
  --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm" && ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"' \
  --customize-hook='echo "node:x:1000:" >>"$1/etc/group" && echo "node:x:1000:1000::/home/node:/bin/bash" >>"$1/etc/passwd" && echo "node:*:20000:0:99999:7:::" >>"$1/etc/shadow" && mkdir -p "$1/home/node" && chown 1000:1000 "$1/home/node"' \
  --customize-hook='env -u NODE_EXTRA_CA_CERTS chroot "$1" node --version >/dev/null && env -u NODE_EXTRA_CA_CERTS chroot "$1" npm --version >/dev/null' \
  bookworm "$out" \
  "deb $mirror/debian bookworm main" "deb $mirror/debian bookworm-updates main" "deb $mirror/debian-security bookworm-security main"
