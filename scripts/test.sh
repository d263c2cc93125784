#!/usr/bin/env bash
# The whole suite (`npm test`): says what it needs from the machine and
# installs the missing Debian packages as root, or stops at once without root
# (scripts/preflight.ts); builds the code and missing servers, type-checks,
# lints, brings the local control plane up once, runs every test file against
# it, and takes it down. With file arguments, only those run, and only the
# servers the plane starts are built up front (the others when a test first
# needs them). Point SVM_DEV_DIR at a running plane (`svm dev up --dir DIR`)
# to reuse it; it is then left running.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== what the suite needs"
node --import tsx scripts/preflight.ts

echo "== build (sources, workflow bundle, KubeConfig bundle)"
npm run --silent build:fast
npm run --silent build:workflows
npm run --silent build:kube

echo "== tools (built once, cached outside the repository)"
# Every server the suite uses, before the first test (a cold machine: about 30 minutes on 2 cores). Built beside the
# tests instead (at nice 19), they took CPU the tests needed: on 2 busy cores the suite ran longer, not shorter.
if [[ $# -eq 0 ]]; then
  bash scripts/tools.sh all >/dev/null
else
  bash scripts/tools.sh etcd etcdctl kube-apiserver kubectl temporal-cli >/dev/null
fi

echo "== typecheck and lint"
npx tsc -p tsconfig.json --noEmit
npm run --silent lint

echo "== local control plane"
owndir= sdir= bpid=
cleanup() {
  if [[ -n "${bpid:-}" ]]; then kill "$bpid" 2>/dev/null || true; wait "$bpid" 2>/dev/null || true; fi
  if [[ -n "$sdir" ]]; then node bin/svm.js dev down --dir "$sdir" >/dev/null 2>&1 || true; rm -rf "$sdir"; fi
  if [[ -n "$owndir" ]]; then node bin/svm.js dev down --dir "$owndir" || true; fi
}
trap cleanup EXIT
if [[ -n "${SVM_DEV_DIR:-}" ]]; then
  dir=$SVM_DEV_DIR
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/svm-test.XXXXXX")
  owndir=$dir
fi
export SVM_DEV_DIR=$dir
# The one plane on temporal-server + PostgreSQL, for the tests only that server can answer
# (test-temporal-server*.test.ts): started by the first of them that runs (serverPlane() in
# test/helpers/plane.ts), shared by the others, taken down at the end. Not started when no such
# file runs, nor when the shared plane itself runs temporal-server (SVM_TEST_TEMPORAL=server).
if [[ -z "${SVM_SERVER_DEV_DIR:-}" ]]; then
  sdir=$(mktemp -d "${TMPDIR:-/tmp}/svm-test-server.XXXXXX")
  export SVM_SERVER_DEV_DIR=$sdir
fi
# Shaped like a cluster (each API server in its own network namespace behind
# haproxy), the StorageVersion API off as in real clusters: tests that need it
# switch it on themselves (setStorageVersionApi). A low continue-as-new
# suggestion so that long migrations exercise it. SVM_TEST_TEMPORAL=server runs
# the suite on temporal-server with PostgreSQL instead of the dev server.
# No kube-controller-manager on the shared plane (a cluster's runs its built-in migrator; `dev up` starts one by
# default): the own-mode tests need the built-in off, and the tests about the built-in start it themselves.
node bin/svm.js dev up --dir "$dir" --apiservers 2 --no-storage-version-api --controller-manager none --temporal "${SVM_TEST_TEMPORAL:-dev}" \
  --temporal-arg=--dynamic-config-value --temporal-arg=limit.historyCount.suggestContinueAsNew=300 >/dev/null
shape=$(node -e 'console.log(require(process.argv[1]).shape)' "$dir/state.json")
echo "plane in $dir: $shape shape"

echo "== tests"
# The tests that migrate every resource of the plane (the trigger's first pass, `svm migrate --all`, the chart's
# pre-upgrade Job, `svm plan`) run first among the plane's tests: later, the CRDs and objects every other test leaves
# behind make each of their passes longer (the trigger's three tests took 22 minutes at the end of a CI run, 4.7
# minutes first on a fresh plane). Each file runs in a node of its own (run_files), in the order given here: node's
# runner sorts the files it is given, and ran these four in alphabetical order among the others.
every=(test/test-trigger.test.ts test/test-migrate-all.test.ts test/test-helm.test.ts test/test-plan.test.ts)
files=("${every[@]}" test/unit-*.test.ts)
for f in test/test-*.test.ts; do
  keep=1
  for e in "${every[@]}"; do [[ "$f" == "$e" ]] && keep=; done
  [[ -n $keep ]] && files+=("$f")
done
if [[ $# -gt 0 ]]; then files=("$@"); fi
# Run beside the others, one after another, not after them: files on planes of their own that mostly wait
# (the built-in migrator's backoffs, minute-long bounds, API server restarts, the rolling upgrade) and touch
# no other plane, and the image's test. The whole run stays within CI's time; their output follows the others'.
beside=()
if [[ $# -eq 0 ]]; then
  # test-image last: it builds the image (CPU, while the main run waits on servers), then migrates a CRD by the
  # 'svm worker' of the image on a plane of its own (on the shared one, the main run's API server restarts reached
  # it twice in CI, and its clean-up of leftover workflows once).
  beside=(test/test-conformance.test.ts test/test-standard-v1beta1.test.ts test/test-upgrade.test.ts test/test-temporal-tls.test.ts test/test-image.test.ts)
fi
rest=()
for f in "${files[@]}"; do
  keep=1
  for b in "${beside[@]}"; do [[ "$f" == "$b" ]] && keep=; done
  [[ -n $keep ]] && rest+=("$f")
done
# Each file also writes TAP to a file of its own: the failures are listed once more at the very end, where a CI log
# that keeps only its tail still shows them, with the time each file took.
taps=$(mktemp -d "${TMPDIR:-/tmp}/svm-test-tap.XXXXXX")
run_files() { # run_files RUN FILE...: one file after another, each in a node of its own
  local run=$1 f s i=0 frc rc=0
  shift
  for f in "$@"; do
    i=$((i + 1))
    s=$SECONDS
    frc=0
    node --import tsx --test \
      --test-reporter=spec --test-reporter-destination=stdout \
      --test-reporter=tap --test-reporter-destination="$taps/$run-$(printf %02d $i)-$(basename "$f" .test.ts).tap" "$f" || frc=$?
    echo "$((SECONDS - s)) $run $f$([[ $frc -ne 0 ]] && echo ' (failed)')" >>"$taps/times"
    [[ $frc -ne 0 ]] && rc=$frc
  done
  return $rc
}
bpid= blog=
if [[ ${#beside[@]} -gt 0 ]]; then
  blog=$(mktemp "${TMPDIR:-/tmp}/svm-test-beside.XXXXXX")
  echo "(beside the others: ${beside[*]}; output at the end)"
  (
    bstart=$SECONDS
    brc=0
    run_files beside "${beside[@]}" || brc=$?
    echo "(the run beside took $((SECONDS - bstart)) s)"
    exit $brc
  ) >"$blog" 2>&1 &
  bpid=$!
fi
rc=0
start=$SECONDS
run_files main "${rest[@]}" || rc=$?
echo "(the main run took $((SECONDS - start)) s)"
if [[ -n $bpid ]]; then
  brc=0
  wait "$bpid" || brc=$?
  bpid=
  echo "== tests beside the others: ${beside[*]}"
  cat "$blog"
  rm -f "$blog"
  if [[ $brc -ne 0 ]]; then rc=$brc; fi
fi
echo "== time per file (seconds, run, file)"
sort -rn "$taps/times" 2>/dev/null | head -n 30 || true
node scripts/tap-summary.mjs "$taps"/*.tap || true
rm -rf "$taps"
echo "(the whole suite took $SECONDS s)"
exit $rc
