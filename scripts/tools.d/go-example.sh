#!/usr/bin/env bash
# The Go upgrade-tool example (examples/go): built with the Temporal Go SDK from
# its Go module into the tools cache, like the servers, once per content of the
# example (a change to it builds a new binary). Prints "upgradetool=PATH".
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SVM_TOOLS_BIN:-${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}/bin}
work=${SVM_TOOLS_WORK:-$(dirname "$bin")/build}
mkdir -p "$bin" "$work"
source "$here/scripts/tools-lib.sh"

src="$here/examples/go"
sum=$(cd "$src" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-12)
out="$bin/upgradetool-$sum"
build_example() {
  cd "$src"
  CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local go build -trimpath -o "$out.tmp" .
  mv "$out.tmp" "$out"
}
if [[ ! -x "$out" ]]; then
  build_lock
  [[ -x "$out" ]] || with_progress "upgradetool-$sum" build_example
fi
echo "upgradetool=$out"
