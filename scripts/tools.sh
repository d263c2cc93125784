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
# The release before: the rolling-upgrade test starts on it, and users on it select it (svm dev up --kube-version).
KUBE_PREV=$(ver kubernetesPrevious)
STAGING_PREV=$(ver kubernetesPreviousStaging)
TEMPORAL=$(ver temporal)

root=${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}
bin="$root/bin"
work="$root/build"
mkdir -p "$bin" "$work"

# One build at a time per cache: a second caller (`svm dev up` while `npm test`
# builds, two terminals) waits here and then finds the binaries built.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$root/.build.lock"
  if ! flock -n 9; then
    echo "[tools] another build into $root is running; waiting for it" >&2
    flock 9
  fi
fi

source "$here/scripts/tools-lib.sh"

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

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

# build_kube VERSION STAGING_VERSION
build_kube() {
  local KUBE=$1 STAGING=$2
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
for pair in "$KUBE:$STAGING" "$KUBE_PREV:$STAGING_PREV"; do
  k=${pair%%:*} s=${pair#*:}
  [[ -x "$bin/kube-apiserver-$k" && -x "$bin/kube-controller-manager-$k" && -x "$bin/kubectl-$k" ]] || with_progress "kubernetes-$k" build_kube "$k" "$s"
done

echo "etcd=$bin/etcd-$ETCD"
echo "etcdctl=$bin/etcdctl-$ETCD"
echo "kube-apiserver=$bin/kube-apiserver-$KUBE"
echo "kube-controller-manager=$bin/kube-controller-manager-$KUBE"
echo "kubectl=$bin/kubectl-$KUBE"
echo "kube-apiserver-previous=$bin/kube-apiserver-$KUBE_PREV"
echo "kube-controller-manager-previous=$bin/kube-controller-manager-$KUBE_PREV"
echo "temporal=$bin/temporal-$TEMPORAL"

# Further tools, each from its own script (Temporal server on PostgreSQL, Helm, the Go SDK example, ...):
# each builds what is missing into "$bin" the same way and prints its own name=path lines.
export SVM_TOOLS_BIN="$bin" SVM_TOOLS_WORK="$work"
for extra in "$here"/scripts/tools.d/*.sh; do
  [[ -e "$extra" ]] || continue
  bash "$extra"
done
