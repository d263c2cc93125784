#!/usr/bin/env bash
# Builds the real servers the project runs against, from their Go modules,
# once per version, into a cache outside the repository:
#   ${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}/bin/<name>-<version>
# Prints "name=path" for every binary at the end. Safe to run again: only what
# is missing is built. Versions live in tools/versions.json.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
versions="$here/tools/versions.json"
ver() { node -p "require('$versions').$1"; }
ETCD=$(ver etcd)
KUBE=$(ver kubernetes)
STAGING=$(ver kubernetesStaging)
TEMPORAL=$(ver temporal)

root=${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}
bin="$root/bin"
work="$root/build"
mkdir -p "$bin" "$work"

say() { printf '[tools] %s\n' "$*" >&2; }
die() { printf '[tools] error: %s\n' "$*" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
  die "Go is not installed. The local etcd, kube-apiserver and Temporal servers are built from source: install Go >= 1.26 (e.g. from go.dev/dl or your distribution) and run 'npm run tools' again."
fi
gov=$(go env GOVERSION | sed 's/^go//')
case "$gov" in
  1.2[6-9]*|1.[3-9]*) ;;
  *) die "Go $gov is too old: kube-apiserver $KUBE needs Go >= 1.26. Install a newer Go and run 'npm run tools' again." ;;
esac

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

# Runs a long command with a heartbeat so a person (or CI log) sees progress.
with_progress() {
  local what=$1; shift
  local start=$SECONDS log="$work/$what.log"
  say "building $what (log: $log)"
  ( "$@" ) >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    local t=$((SECONDS - start))
    if (( t % 30 < 5 )) && kill -0 "$pid" 2>/dev/null; then say "  ... $what still building (${t}s)"; fi
  done
  if ! wait "$pid"; then
    tail -n 30 "$log" >&2
    if grep -qiE 'dial tcp|no such host|proxyconnect|connection refused|i/o timeout|TLS handshake' "$log"; then
      die "building $what failed: the Go module proxy ($(go env GOPROXY)) cannot be reached. Check network access to it or set GOPROXY, then run 'npm run tools' again. Full log: $log"
    fi
    die "building $what failed after $((SECONDS - start))s; full log: $log"
  fi
  say "built $what in $((SECONDS - start))s"
}

build_etcd() {
  local d="$work/etcd-$ETCD"
  rm -rf "$d" && mkdir -p "$d" && cd "$d"
  go mod init svm-tools/etcd
  go get "go.etcd.io/etcd/server/v3@$ETCD" "go.etcd.io/etcd/etcdctl/v3@$ETCD"
  go build -trimpath -o "$d/etcd" go.etcd.io/etcd/server/v3
  go build -trimpath -o "$d/etcdctl" go.etcd.io/etcd/etcdctl/v3
  mv "$d/etcd" "$bin/etcd-$ETCD"
  mv "$d/etcdctl" "$bin/etcdctl-$ETCD"
}

build_temporal() {
  local d="$work/temporal-$TEMPORAL"
  rm -rf "$d" && mkdir -p "$d"
  GOBIN="$d" go install -trimpath "github.com/temporalio/cli/cmd/temporal@$TEMPORAL"
  mv "$d/temporal" "$bin/temporal-$TEMPORAL"
}

build_kube() {
  local d="$work/kubernetes-$KUBE"
  rm -rf "$d" && mkdir -p "$d" && cd "$d"
  go mod init svm-tools/kubernetes
  # k8s.io/kubernetes requires its staging modules at v0.0.0 with relative
  # replaces; point each at its published version instead.
  local src
  src=$(go mod download -json "k8s.io/kubernetes@$KUBE" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).Dir))')
  {
    echo "require k8s.io/kubernetes $KUBE"
    echo "replace ("
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/src/' "$src/go.mod" | awk -v v="$STAGING" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >>go.mod
  go mod tidy -e >/dev/null 2>&1 || true
  local major=${KUBE#v}; major=${major%%.*}
  local minor=${KUBE#v*.}; minor=${minor%%.*}
  local ld=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$KUBE -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE" "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBE" "k8s.io/kubernetes/cmd/kubectl@$KUBE" 2>/dev/null || true
  mkdir -p out
  go build -trimpath -ldflags "-s -w $ld" -o out/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
  mv out/kube-apiserver "$bin/kube-apiserver-$KUBE"
  mv out/kube-controller-manager "$bin/kube-controller-manager-$KUBE"
  mv out/kubectl "$bin/kubectl-$KUBE"
}

[[ -x "$bin/etcd-$ETCD" && -x "$bin/etcdctl-$ETCD" ]] || with_progress "etcd-$ETCD" build_etcd
[[ -x "$bin/temporal-$TEMPORAL" ]] || with_progress "temporal-$TEMPORAL" build_temporal
[[ -x "$bin/kube-apiserver-$KUBE" && -x "$bin/kube-controller-manager-$KUBE" && -x "$bin/kubectl-$KUBE" ]] || with_progress "kubernetes-$KUBE" build_kube

echo "etcd=$bin/etcd-$ETCD"
echo "etcdctl=$bin/etcdctl-$ETCD"
echo "kube-apiserver=$bin/kube-apiserver-$KUBE"
echo "kube-controller-manager=$bin/kube-controller-manager-$KUBE"
echo "kubectl=$bin/kubectl-$KUBE"
echo "temporal=$bin/temporal-$TEMPORAL"
