#!/usr/bin/env bash
# The whole suite (`npm test`): says what it needs from the machine and
# installs the missing Debian packages as root, or stops at once without root
# (scripts/preflight.ts); builds the code and missing servers, type-checks,
# lints, brings the local control plane up once, runs every test file against
# it (and, once the lane beside the main run has done its own files, the files
# left on a second plane of the same shape), and takes them down. With file
# arguments, only those run, on the one plane, and only the
# servers the plane starts are built up front (the others when a test first
# needs them). Point SVM_DEV_DIR at a running plane (`svm dev up --dir DIR`)
# to reuse it; it is then left running. Each file has a bound
# (SVM_TEST_FILE_TIMEOUT seconds, 1200 by default), past which it is ended,
# saying what it was waiting on; each file's time is printed as it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== what the suite needs"
node --import tsx scripts/preflight.ts

echo "== build (sources, workflow bundle, KubeConfig bundle)"
npm run --silent build:fast
npm run --silent build:workflows
npm run --silent build:kube

# The type check and lint run while the tools build (on a cold machine the builds wait on module downloads at times);
# their output follows the tools'.
checks=$(mktemp "${TMPDIR:-/tmp}/svm-test-checks.XXXXXX")
{ npx tsc -p tsconfig.json --noEmit && npm run --silent lint; } >"$checks" 2>&1 &
checks_pid=$!

echo "== tools (built once, cached outside the repository)"
# What the shared plane starts (etcd, kube-apiserver, kubectl, the Temporal CLI), before the first test. The others
# (kube-controller-manager, Helm, temporal-server, the Go example, the previous release) are built in the lane beside
# the main run, before that lane's files, one at a time: one lane's tests leave the cores idle much of the time (a
# few percent busy in test-apf, under half in test-bridge; two lanes together about 81 %), so those builds overlap
# their waits, where before the first test a build adds its whole time; they do slow the tests beside them
# (test-trigger took 654 s beside them in the cold run of 2026-12-06, 300 warm). A test that needs one first waits for its build (scripts/tools.sh holds a lock, released
# between two of them). kube-controller-manager first (test-built-in and test-workflow-delegate need it: svm's defer mode), then
# Helm (test-helm, early in the main run); the previous release last. A cold machine: docs/development.md.
bash scripts/tools.sh etcd etcdctl kube-apiserver kubectl temporal-cli >/dev/null
later=()
if [[ $# -eq 0 ]]; then later=(kube-controller-manager helm temporal-server upgradetool kube-apiserver-previous); fi

echo "== typecheck and lint"
checks_rc=0
wait "$checks_pid" || checks_rc=$?
cat "$checks"
rm -f "$checks"
if [[ $checks_rc -ne 0 ]]; then
  echo "the type check or lint failed (above)"
  exit "$checks_rc"
fi

echo "== local control plane"
owndir= bdir= bpid= file_pid= watchdog= taps=
run_dirs=() # the directories of the run's planes several files share (below), which this run made
# A plane this run started is taken down and its directory (etcd's data, the logs: some 200 MB) removed; a plane
# that would not come down keeps its directory, for `svm dev down --dir` and its logs. First the planes the test
# files started themselves (their ledgers: down_planes), then the shared ones.
cleanup() {
  stop_file
  if [[ -n "${bpid:-}" ]]; then kill "$bpid" 2>/dev/null || true; wait "$bpid" 2>/dev/null || true; fi
  if [[ -n ${taps:-} && -d $taps ]]; then
    down_planes "the run ended" "$taps"/planes/*
    rm -rf "$taps"
  fi
  local d left=0
  for d in "${run_dirs[@]}" "$bdir"; do
    [[ -n "$d" ]] || continue
    if [[ -e "$d/state.json" ]]; then
      node bin/svm.js dev down --dir "$d" >/dev/null 2>&1 || true
      if still_running "$d"; then rm -rf "$d"; else left=1; fi
    else
      rm -rf "$d"
    fi
  done
  if [[ -n "$owndir" ]]; then node bin/svm.js dev down --dir "$owndir" && rm -rf "$owndir" || true; fi
  # A process of a plane that `svm dev down` left running fails the run (the files that share a plane no longer see
  # it come down: test-temporal-tls and test-fleet-domains checked so of the secured plane when each had its own).
  if [[ $left -ne 0 ]]; then exit 1; fi
}
# still_running DIR: says which processes of the plane in DIR (its state.json: every record with a pid) still run, and
# then fails; succeeds when none does. The directory is kept then, for its logs.
still_running() {
  local out
  out=$(node --import tsx -e 'const { isRunning } = require("./src/dev/processes");
    const left = [];
    const walk = (o, at) => {
      if (!o || typeof o !== "object") return;
      if (o.pid && o.binary && isRunning(o)) left.push(`${at} (pid ${o.pid})`);
      for (const [k, v] of Object.entries(o)) walk(v, at ? `${at}.${k}` : k);
    };
    walk(JSON.parse(require("fs").readFileSync(process.argv[1] + "/state.json", "utf8")), "");
    if (left.length) { console.log(left.join(", ")); process.exit(1); }' "$1" 2>&1) && return 0
  echo "the plane in $1 did not come down, still running: $out (directory kept)" >&2
  return 1
}
# The test file running has a session of its own (run_bounded), which an interrupt does not reach: it is ended here,
# and its watchdog with it.
stop_file() {
  if [[ -n ${watchdog:-} ]]; then kill "$watchdog" 2>/dev/null || true; fi
  if [[ -n ${file_pid:-} ]]; then kill -KILL -- "-$file_pid" 2>/dev/null || true; fi
}
# down_planes WHY LEDGER...: takes down every plane a test file's ledger names (test/helpers/plane.ts recordPlane, in
# SVM_TEST_PLANE_LEDGER: each entry a plane's directory, written before the plane starts) whose directory still
# holds its state, and removes that directory (or keeps it when the plane would not come down). A plane's servers run
# detached: without this, a file ended at its bound (or a run interrupted) left its own planes running, and every
# later file slower. A file that ended well took its planes down already (removePlanes): nothing is left to do.
down_planes() {
  local why=$1 ledger entry d
  shift
  for ledger in "$@"; do
    [[ -d $ledger ]] || continue
    for entry in "$ledger"/*; do
      [[ -f $entry ]] || continue
      d=$(<"$entry")
      rm -f "$entry"
      [[ -n $d && -e $d/state.json ]] || continue
      if node bin/svm.js dev down --dir "$d" >/dev/null 2>&1; then
        rm -rf "$d"
        echo "-- $(basename "$ledger"): its plane in $d was still there when $why: taken down" >&3
      else
        echo "-- $(basename "$ledger"): its plane in $d was still there when $why and did not come down (directory kept)" >&3
      fi
    done
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [[ -n "${SVM_DEV_DIR:-}" ]]; then
  dir=$SVM_DEV_DIR
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/svm-test.XXXXXX")
  owndir=$dir
fi
export SVM_DEV_DIR=$dir
# The planes the run starts once for several files (test/helpers/plane.ts), each by the first file that needs it, in
# a directory named here, taken down at the end (and checked to have come down: still_running); not started when no
# such file runs. Which files use one is read from the files (the helper they call): they run one after another, as
# one item of the queue (below), because each leaves the plane as it found it, which would remove another's objects.
#   SVM_SERVER_DEV_DIR, serverPlane(): temporal-server on PostgreSQL, for what only that server shows
#     (test-temporal-server*.test.ts, test-fleet-planes' north); not when the shared plane itself runs temporal-server
#     (SVM_TEST_TEMPORAL=server).
#   SVM_SECURED_DEV_DIR, securedServerPlane(): temporal-server with mTLS and JWT authorization (test-temporal-tls,
#     test-fleet-domains).
#   SVM_PREVIOUS_DEV_DIR, previousPlane(): the previous Kubernetes release serving storagemigration.k8s.io/v1beta1
#     (test-standard-v1beta1, test-worker-rights); test-upgrade keeps planes of its own, which it upgrades.
run_planes=(SVM_SERVER_DEV_DIR 'serverPlane()' SVM_SECURED_DEV_DIR 'securedServerPlane()' SVM_PREVIOUS_DEV_DIR 'previousPlane()')
for ((i = 0; i < ${#run_planes[@]}; i += 2)); do
  v=${run_planes[i]}
  if [[ -z "${!v:-}" ]]; then
    d=$(mktemp -d "${TMPDIR:-/tmp}/svm-test-$(tr 'A-Z_' 'a-z-' <<<"${v#SVM_}").XXXXXX")
    export "$v=$d"
    run_dirs+=("$d")
  fi
done
# Shaped like a cluster (each API server in its own network namespace behind
# haproxy), the StorageVersion API off as in real clusters: tests that need it
# switch it on themselves (setStorageVersionApi). A low continue-as-new
# suggestion so that long migrations exercise it. SVM_TEST_TEMPORAL=server runs
# the suite on temporal-server with PostgreSQL instead of the dev server.
# No kube-controller-manager on the shared plane (a cluster's runs its built-in migrator; `dev up` starts one by
# default): the own-mode tests need the built-in off, and the tests about the built-in start it themselves.
plane_up() { # plane_up DIR: a plane of the shared plane's shape in DIR (the lane beside starts a second one)
  node bin/svm.js dev up --dir "$1" --apiservers 2 --no-storage-version-api --controller-manager none --temporal "${SVM_TEST_TEMPORAL:-dev}" \
    --temporal-arg=--dynamic-config-value --temporal-arg=limit.historyCount.suggestContinueAsNew=300 >/dev/null
  echo "plane in $1: $(node -e 'console.log(require(process.argv[1]).shape)' "$1/state.json") shape"
}
plane_up "$dir"

echo "== tests"
# The tests that migrate every resource of the plane (the trigger's first pass, `svm migrate --all`, the chart's
# pre-upgrade Job, `svm plan`) run first among the plane's tests. Since each file leaves the plane as it found it
# (test/helpers/plane-ledger.ts) they no longer need to (before that, the CRDs and objects other tests left made the
# trigger's three tests take 22 minutes at the end of a CI run, 4.7 first); the order stays, and SVM_TEST_SHUFFLE
# (below) runs another. The files that need the previous release or temporal-server (last) are the lane beside's
# first once it has built them (below). Each file runs in a node of its own (run_files), taken from a queue in the
# order given here (run_queue, below).
every=(test/test-trigger.test.ts test/test-migrate-all.test.ts test/test-helm.test.ts test/test-plan.test.ts)
last=(test/test-fleet-planes.test.ts test/test-worker-rights.test.ts test/test-standard-v1beta1.test.ts test/test-temporal-server.test.ts
  test/test-temporal-server-durability.test.ts test/test-temporal-server-ui.test.ts test/test-worker-versioning.test.ts
  test/test-temporal-tls.test.ts test/test-fleet-domains.test.ts)
files=("${every[@]}" test/unit-*.test.ts)
for f in test/test-*.test.ts; do
  keep=1
  for e in "${every[@]}" "${last[@]}"; do [[ "$f" == "$e" ]] && keep=; done
  [[ -n $keep ]] && files+=("$f")
done
files+=("${last[@]}")
if [[ $# -gt 0 ]]; then files=("$@"); fi
# The files beside: on planes of their own, they mostly wait (the built-in migrator's backoffs, minute-long bounds, API
# server restarts, the rolling upgrade) and touch no other plane; the memory budget's test (a plane of its own with
# large objects) and the image's test. The lane beside runs them (below), the main lane any it reaches first. Note: a
# file here must never touch the shared plane: each main-run file removes, when it ends, what was made on that plane
# while it ran (test/helpers/plane-ledger.ts).
beside=()
if [[ $# -eq 0 ]]; then
  # test-image is no longer one of them: the image's worker runs on the plane of the lane that takes it, alone there
  # (each lane runs one file at a time on its plane). Before the lanes, it ran beside the main run on the shared plane,
  # where the main run's API server restarts reached it twice in CI, and its clean-up of leftover workflows once; it
  # then started a two-server plane of its own only for its worker.
  beside=(test/test-conformance.test.ts test/test-upgrade.test.ts test/test-memory-budget.test.ts)
fi
# The main run's files as a queue of items, each a file or the files of one of the run's planes several files share
# (run_planes, above: the files that call its helper, one plane whose objects each file leaves as it found them and
# whose servers some of them restart, so they run one after another as one item; a file that calls two such helpers
# makes their items one). Two lanes take the items in order, each one no other lane took: the main lane on the shared plane
# from the start, and the lane beside, once its builds are done, on a second plane of the same shape that it starts
# then (the main lane alone would leave the lane beside idle for half the run). Each file leaves the plane it ran on
# as it found it (test/helpers/plane-ledger.ts), so which lane takes a file does not change what it tests.
# Which files those are is read from the files themselves, so that a new one cannot run on that plane beside another.
declare -A plane_item=() # a run plane's variable: the index of its item
items=()
for f in "${files[@]}"; do
  keep=1
  for b in "${beside[@]}"; do [[ "$f" == "$b" ]] && keep=; done
  [[ -z $keep ]] && continue
  uses=()
  for ((i = 0; i < ${#run_planes[@]}; i += 2)); do
    if [[ $f == test/test-* ]] && grep -qF "${run_planes[i + 1]}" "$f"; then uses+=("${run_planes[i]}"); fi
  done
  at=-1
  for v in "${uses[@]}"; do
    j=${plane_item[$v]:--1}
    [[ $j -lt 0 || $j -eq $at ]] && continue
    if [[ $at -lt 0 ]]; then
      at=$j
    else # another plane's item already: its files join this one (the emptied item is dropped below)
      items[at]+=" ${items[j]}"
      items[j]=
      for w in "${!plane_item[@]}"; do [[ ${plane_item[$w]} -eq $j ]] && plane_item[$w]=$at; done
    fi
  done
  if [[ $at -ge 0 ]]; then
    items[at]+=" $f"
  else
    at=${#items[@]}
    items+=("$f")
  fi
  for v in "${uses[@]}"; do plane_item[$v]=$at; done
done
kept=()
for it in "${items[@]}"; do [[ -n $it ]] && kept+=("$it"); done
items=("${kept[@]}")
# SVM_TEST_SHUFFLE=<seed>|random: the items in an order drawn from the seed (printed, to run it again). Each file leaves
# the plane as it found it, so any order must pass.
if [[ -n ${SVM_TEST_SHUFFLE:-} ]]; then
  shuffled=$(node scripts/shuffle.mjs "$SVM_TEST_SHUFFLE" "${items[@]}")
  mapfile -t items <<<"$shuffled"
fi
# The files beside end the queue, each an item: the lane beside takes them first (below), and the main lane any it
# reaches first once its own are done (on a slow machine the lane beside's builds can take half an hour). They run on
# planes of their own, whichever lane takes them.
first_beside=${#items[@]}
items+=("${beside[@]}")
# Each file also writes TAP to a file of its own: the failures are listed once more at the very end, where a CI log
# that keeps only its tail still shows them, with the time each file took.
taps=$(mktemp -d "${TMPDIR:-/tmp}/svm-test-tap.XXXXXX")
queue=$taps/queue
mkdir "$queue" "$taps/planes"
# Every file has a bound, SVM_TEST_FILE_TIMEOUT seconds (set it to override). The default, 1200 s, is a little
# over twice the slowest file of the runs since each file leaves the plane as it found it (docs/development.md, on the
# slow 2-core machine kind: test-trigger 654 s beside the cold builds, test-conformance 575 s cold, 539 warm): room for
# a colder or slower machine, while a file that hangs costs 20 minutes of the run, not the hour the default was (set
# when test-trigger once took 22 minutes behind other files' leftovers). A file past it is ended (end_file): its
# test process says what it was waiting on and how its servers answer (test/helpers/waits.ts), node's runner reports
# the file failed, the planes it started are taken down (down_planes), and this says which file and when.
file_timeout=${SVM_TEST_FILE_TIMEOUT:-1200}
[[ $file_timeout =~ ^[1-9][0-9]*$ ]] || { echo "SVM_TEST_FILE_TIMEOUT must be a whole number of seconds, not '$file_timeout'" >&2; exit 2; }
# Each file's time as it ends, beside files included (their output comes at the end): on this script's own stdout.
exec 3>&1
children_of() { # children_of PID: the processes whose parent is PID, from /proc (ps may not be installed)
  local stat line fields
  for stat in /proc/[0-9]*/stat; do
    { read -r line <"$stat"; } 2>/dev/null || continue
    read -ra fields <<<"${line##*) }" # after the command's name, which may hold spaces: state, ppid, ...
    if [[ ${fields[1]:-} == "$1" ]]; then
      stat=${stat#/proc/}
      echo "${stat%/stat}"
    fi
  done
}
end_file() { # end_file PID: ends the file whose runner is PID: SIGTERM to its test process, then its whole group 30 s later
  local kids i
  kids=$(children_of "$1" || true)
  if [[ -n $kids ]]; then kill -TERM $kids 2>/dev/null || true; fi # unquoted: one PID a word
  for ((i = 0; i < 30; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 1
  done
  kill -KILL -- "-$1" 2>/dev/null || true # the runner if it is still there, and what the test left (worker processes)
}
watch_file() { # watch_file PID MARK: past $file_timeout s, marks MARK and ends the file whose runner is PID
  local sleeper=
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  sleep "$file_timeout" &
  sleeper=$!
  wait "$sleeper" || exit 0 # only a bound that passed ends the file
  trap '' TERM # ending the file now: run_bounded waits for it
  : >"$2"
  end_file "$1"
}
run_bounded() { # run_bounded TAP FILE LEDGER: node's runner on FILE, in a session of its own, for $file_timeout s at most
  local rc=0
  # Note: setsid makes node the leader of a new session and process group (its PID theirs) without a fork: a
  # background command of a shell without job control is no group leader. end_file signals that group.
  # LEDGER: where the file records the planes it starts (test/helpers/plane.ts recordPlane), for down_planes.
  SVM_TEST_PLANE_LEDGER=$3 setsid node --import tsx --test \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$1" "$2" 3>&- &
  file_pid=$!
  watch_file "$file_pid" "$1.ended" >/dev/null 2>&1 3>&- &
  watchdog=$!
  wait "$file_pid" || rc=$?
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  file_pid= watchdog=
  return $rc
}
take_item() { # take_item RUN I: item I's files, one after another, unless a lane took it already (mkdir takes it: atomic)
  local item
  mkdir "$queue/$2" 2>/dev/null || return 0
  read -ra item <<<"${items[$2]}"
  run_files "$1" "${item[@]}"
}
run_queue() { # run_queue RUN: the queue's items in order, each one that no lane took yet
  local i rc=0
  for ((i = 0; i < ${#items[@]}; i++)); do take_item "$1" "$i" || rc=$?; done
  return $rc
}
run_files() { # run_files RUN FILE...: one file after another, each in a node of its own
  local run=$1 f s frc rc=0 tap took outcome note
  shift
  for f in "$@"; do
    s=$SECONDS
    frc=0
    tap="$taps/$run-$(basename "$f" .test.ts).tap" # each file runs once
    run_bounded "$tap" "$f" "$taps/planes/$(basename "$f" .test.ts)" || frc=$?
    took=$((SECONDS - s))
    outcome=passed
    if [[ -e $tap.ended ]]; then
      outcome="ended past its bound of $file_timeout s"
    elif [[ $frc -ne 0 ]]; then
      outcome=failed
    fi
    note=
    [[ $outcome != passed ]] && note=" ($outcome)"
    echo "$took $run $f$note" >>"$taps/times"
    echo "-- $f: $took s, $outcome ($run run)" >&3
    # The planes the file started and left (ended at its bound, or failed before its clean-up): taken down now, before
    # the next file runs beside them.
    down_planes "the file ended" "$taps/planes/$(basename "$f" .test.ts)"
    [[ $frc -ne 0 ]] && rc=$frc
  done
  return $rc
}
bpid= blog=
if [[ ${#beside[@]} -gt 0 ]]; then
  blog=$(mktemp "${TMPDIR:-/tmp}/svm-test-beside.XXXXXX")
  bdir=$(mktemp -d "${TMPDIR:-/tmp}/svm-test-second.XXXXXX")
  echo "(beside the others: ${beside[*]}; output at the end)"
  (
    trap 'stop_file; exit 143' TERM
    trap 'stop_file; exit 130' INT
    bstart=$SECONDS
    brc=0
    if [[ ${#later[@]} -gt 0 ]]; then
      echo "-- building beside the main run: ${later[*]}" >&3
      for t in "${later[@]}"; do bash scripts/tools.sh "$t" >/dev/null || brc=$?; done
      echo "-- built beside the main run in $((SECONDS - bstart)) s (rc $brc): ${later[*]}" >&3
    fi
    # This lane's own plane, of the shared plane's shape: the files it takes from the main run's queue run there.
    # First the items of the files that need what was just built (the previous release, temporal-server), so that
    # the main lane never waits for a build; then the files beside (planes of their own); then whatever is left.
    if plane_up "$bdir"; then
      export SVM_DEV_DIR=$bdir
      for ((i = 0; i < ${#items[@]}; i++)); do
        for f in "${last[@]}"; do
          if [[ " ${items[i]} " == *" $f "* ]]; then
            take_item beside "$i" || brc=$?
            break
          fi
        done
      done
      for ((i = first_beside; i < ${#items[@]}; i++)); do take_item beside "$i" || brc=$?; done
      echo "-- the lane beside takes the main run's files left ($((SECONDS - bstart)) s in)" >&3
      run_queue beside || brc=$?
    else
      echo "the second plane did not come up (the run fails for it): the main lane runs the queue's files"
      brc=1
    fi
    echo "(the run beside took $((SECONDS - bstart)) s)"
    exit $brc
  ) >"$blog" 2>&1 &
  bpid=$!
fi
rc=0
start=$SECONDS
run_queue main || rc=$?
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
if grep -q 'ended past its bound' "$taps/times" 2>/dev/null; then
  echo "== files ended past their bound (SVM_TEST_FILE_TIMEOUT=$file_timeout s): what each waited on is in its output"
  grep 'ended past its bound' "$taps/times"
fi
node scripts/tap-summary.mjs "$taps"/*.tap || true
down_planes "the run ended" "$taps"/planes/*
rm -rf "$taps"
echo "(the whole suite took $SECONDS s)"
exit $rc
