#!/usr/bin/env bash
# Helm (the chart in charts/svm: helm lint, helm template, helm install in
# test/test-helm.test.ts), built from its Go module (helm.sh/helm/v4, cmd/helm)
# into the tools cache like the servers, once per version (tools/versions.json
# "helm"). Prints "helm=PATH".
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SVM_TOOLS_BIN:-${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}/bin}
work=${SVM_TOOLS_WORK:-$(dirname "$bin")/build}
mkdir -p "$bin" "$work"
source "$here/scripts/tools-lib.sh"

HELM=$(node -p "require('$here/tools/versions.json').helm")
major=${HELM#v}
major=${major%%.*}
out="$bin/helm-$HELM"
build_helm() {
  local d="$work/helm-$HELM"
  rm -rf "$d" && mkdir -p "$d"
  # helm.sh/helm/v4 v4.3.x says `go 1.26.0` and has no replace directives:
  # `go install module@version` with the local Go; the version is stamped as
  # Helm's own Makefile does for a tagged release.
  CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOBIN="$d" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v$major/internal/version.version=$HELM -X helm.sh/helm/v$major/internal/version.metadata= -X helm.sh/helm/v$major/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v$major/cmd/helm@$HELM"
  mv "$d/helm" "$out"
}
if [[ ! -x "$out" ]]; then
  build_lock
  [[ -x "$out" ]] || with_progress "helm-$HELM" build_helm
fi
echo "helm=$out"
