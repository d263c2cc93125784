#!/usr/bin/env bash
# Builds the real servers the project runs against, from their Go modules,
# once per version, into a cache outside the repository:
#   ${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}/bin/<name>-<version>
# Versions live in tools/versions.json. Safe to run again: only what is missing
# is built.
#
#   scripts/tools.sh [--dry-run] [NAME...]
#
# NAMEs (none, or `all`: every one):
#   etcd etcdctl                 etcd
#   kube-apiserver kube-controller-manager kubectl
#                                Kubernetes (the default release); `kube` is all three
#   kube-apiserver-previous kube-controller-manager-previous kubectl-previous
#                                the release before; `kube-previous` is its two servers. npm test
#                                builds its kube-apiserver only (the rolling upgrade, the planes on
#                                it); its kube-controller-manager, for 1.36's built-in migrator, only
#                                `npm run reference:built-in` runs; no test runs kubectl-previous
#   temporal-cli                 the Temporal CLI (dev server and Web UI)
#   temporal-server              temporal-server, temporal-sql-tool, its schema and the UI server (scripts/tools.d)
#   helm                         Helm (the chart's tests; scripts/tools.d)
#   upgradetool                  the Go example (examples/go; scripts/tools.d)
# Prints "name=path" for each named binary at the end. With --dry-run it says
# what is cached and what it would build, and builds nothing. `svm dev up`,
# `npm run demo` and the tests call it with the names of what they start.
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

every=(etcd etcdctl kube-apiserver kube-controller-manager kubectl kube-apiserver-previous kube-controller-manager-previous kubectl-previous
  temporal-cli temporal-server helm upgradetool)
dry=
names=()
for a in "$@"; do
  case "$a" in
    --dry-run | --list) dry=1 ;;
    -h | --help)
      sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    all) names+=("${every[@]}") ;;
    kube) names+=(kube-apiserver kube-controller-manager kubectl) ;;
    kube-previous) names+=(kube-apiserver-previous kube-controller-manager-previous) ;;
    etcd | etcdctl | kube-apiserver | kube-controller-manager | kubectl | kube-apiserver-previous | kube-controller-manager-previous | \
      kubectl-previous | temporal-cli | temporal-server | helm | upgradetool) names+=("$a") ;;
    *)
      echo "[tools] error: unknown name '$a': expected etcd, etcdctl, kube-apiserver, kube-controller-manager, kubectl, kube, their -previous forms, kube-previous, temporal-cli, temporal-server, helm, upgradetool or all" >&2
      exit 2
      ;;
  esac
done
if [[ ${#names[@]} -eq 0 ]]; then names=("${every[@]}"); fi
wants() {
  local n
  for n in "${names[@]}"; do [[ "$n" == "$1" ]] && return 0; done
  return 1
}

root=${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}
bin="$root/bin"
work="$root/build"
mkdir -p "$bin" "$work"
if [[ -n $dry ]]; then export SVM_TOOLS_DRY_RUN=1; fi

source "$here/scripts/tools-lib.sh"

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

build_etcd() {
  local d="$work/etcd-$ETCD"
  rm -rf "$d" && mkdir -p "$d" && cd "$d"
  go mod init svm-tools/etcd
  go get "go.etcd.io/etcd/server/v3@$ETCD" "go.etcd.io/etcd/etcdctl/v3@$ETCD"
  local b
  for b in "$@"; do
    case "$b" in
      etcd) go build -trimpath -o "$d/etcd" go.etcd.io/etcd/server/v3 ;;
      etcdctl) go build -trimpath -o "$d/etcdctl" go.etcd.io/etcd/etcdctl/v3 ;;
    esac
    mv "$d/$b" "$bin/$b-$ETCD"
  done
}

build_temporal() {
  local d="$work/temporal-$TEMPORAL"
  rm -rf "$d" && mkdir -p "$d"
  GOBIN="$d" go install -trimpath "github.com/temporalio/cli/cmd/temporal@$TEMPORAL"
  mv "$d/temporal" "$bin/temporal-$TEMPORAL"
}

# build_kube VERSION STAGING_VERSION BINARY... (kube-apiserver, kube-controller-manager, kubectl): only those
# are compiled (one go build; a later build of another binary of the release reuses Go's build cache).
build_kube() {
  local KUBE=$1 STAGING=$2
  shift 2
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
  local pkgs=() b
  for b in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  local at=("${pkgs[@]/%/@$KUBE}")
  go get "${at[@]}" 2>/dev/null || true
  mkdir -p out
  go build -trimpath -ldflags "-s -w $ld" -o out/ "${pkgs[@]}"
  for b in "$@"; do mv "out/$b" "$bin/$b-$KUBE"; done
}

# What each name is, as "binary-file" in $bin; the kube ones by release.
missing_of() { # missing_of FILE... -> prints those that are not there
  local f
  for f in "$@"; do [[ -x "$bin/$f" ]] || echo "$f"; done
}
# What is missing of what was asked for, in etcd_bins, temporal_missing, kube_bins, kube_prev_bins and plan.
find_missing() {
  plan=() etcd_bins=() temporal_missing= kube_bins=() kube_prev_bins=()
  local b
  for b in etcd etcdctl; do
    if wants "$b" && [[ -n $(missing_of "$b-$ETCD") ]]; then etcd_bins+=("$b"); fi
  done
  if wants temporal-cli && [[ -n $(missing_of "temporal-$TEMPORAL") ]]; then temporal_missing=1; fi
  for b in kube-apiserver kube-controller-manager kubectl; do
    if wants "$b" && [[ -n $(missing_of "$b-$KUBE") ]]; then kube_bins+=("$b"); fi
    if wants "$b-previous" && [[ -n $(missing_of "$b-$KUBE_PREV") ]]; then kube_prev_bins+=("$b"); fi
  done
  for b in "${etcd_bins[@]}"; do plan+=("$b-$ETCD"); done
  [[ -n $temporal_missing ]] && plan+=("temporal-$TEMPORAL")
  for b in "${kube_bins[@]}"; do plan+=("$b-$KUBE"); done
  for b in "${kube_prev_bins[@]}"; do plan+=("$b-$KUBE_PREV"); done
  return 0
}
find_missing
# Only a caller with something to build waits for another's build; then it looks again.
if [[ ${#plan[@]} -gt 0 && -z $dry ]]; then
  build_lock
  find_missing
fi
if [[ ${#plan[@]} -gt 0 ]]; then
  say "$([[ -n $dry ]] && echo 'would build' || echo 'to build') into $bin: ${plan[*]} (once; on 2 shared cores etcd took about 2.5 min, the Temporal CLI 7, kube-apiserver 14, all three Kubernetes binaries 18: docs/benchmarks.md)"
fi

# With more than 2 cores the builds asked for run side by side: each spends part of its time fetching modules through
# the proxy with the cores idle (cold on 2026-12-06: about 20 s of etcd's 136, 50 of the Temporal CLI's 271, 50 of
# Kubernetes' 553), which the others' compiling then uses. Go's module and build caches are safe to share between
# them. On 2 cores they run one after the other: side by side there, etcd, the CLI and kube-apiserver took 1070 s
# cold (the cores 99 % busy) against 960 one after the other (89 %): the compiles contend for more than they gain.
side_by_side=$(($(nproc) > 2))
builds=()
build() { # build NAME FUNCTION ARGS...: with_progress, in the background when side by side (a failure ends the script)
  if ((side_by_side)); then
    with_progress "$@" &
    builds+=($!)
  else
    with_progress "$@"
  fi
}
if [[ ${#etcd_bins[@]} -gt 0 ]]; then build "etcd-$ETCD" build_etcd "${etcd_bins[@]}"; fi
if [[ -n $temporal_missing ]]; then build "temporal-$TEMPORAL" build_temporal; fi
if [[ ${#kube_bins[@]} -gt 0 ]]; then build "kubernetes-$KUBE" build_kube "$KUBE" "$STAGING" "${kube_bins[@]}"; fi
if [[ ${#kube_prev_bins[@]} -gt 0 ]]; then build "kubernetes-$KUBE_PREV" build_kube "$KUBE_PREV" "$STAGING_PREV" "${kube_prev_bins[@]}"; fi
failed=0
for b in "${builds[@]}"; do wait "$b" || failed=1; done
[[ $failed -eq 0 ]] || die "a build failed: its error is above"

if wants etcd; then echo "etcd=$bin/etcd-$ETCD"; fi
if wants etcdctl; then echo "etcdctl=$bin/etcdctl-$ETCD"; fi
if wants kube-apiserver; then echo "kube-apiserver=$bin/kube-apiserver-$KUBE"; fi
if wants kube-controller-manager; then echo "kube-controller-manager=$bin/kube-controller-manager-$KUBE"; fi
if wants kubectl; then echo "kubectl=$bin/kubectl-$KUBE"; fi
if wants kube-apiserver-previous; then echo "kube-apiserver-previous=$bin/kube-apiserver-$KUBE_PREV"; fi
if wants kube-controller-manager-previous; then echo "kube-controller-manager-previous=$bin/kube-controller-manager-$KUBE_PREV"; fi
if wants kubectl-previous; then echo "kubectl-previous=$bin/kubectl-$KUBE_PREV"; fi
if wants temporal-cli; then echo "temporal=$bin/temporal-$TEMPORAL"; fi

# Further tools, each from its own script in scripts/tools.d: each builds what is missing into "$bin" the same
# way (or, with --dry-run, says it would) and prints its own name=path lines.
export SVM_TOOLS_BIN="$bin" SVM_TOOLS_WORK="$work"
for extra in temporal-server helm upgradetool; do
  if wants "$extra"; then
    script=$extra
    [[ $extra == upgradetool ]] && script=go-example
    bash "$here/scripts/tools.d/$script.sh"
  fi
done
