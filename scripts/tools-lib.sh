# Shared by scripts/tools.sh and scripts/tools.d/*.sh: messages and a build with a heartbeat.
# Needs $work (the build directory) set by the caller.
say() { printf '[tools] %s\n' "$*" >&2; }
die() { printf '[tools] error: %s\n' "$*" >&2; exit 1; }

if [[ -n ${SVM_TOOLS_DRY_RUN:-} ]]; then
  : # --dry-run: nothing is built, so Go need not be there
elif ! command -v go >/dev/null 2>&1; then
  die "Go is not installed. The local etcd, kube-apiserver and Temporal servers are built from source: install Go >= 1.26 (e.g. from go.dev/dl or your distribution) and run 'npm run tools' again."
else
  gov=$(go env GOVERSION | sed 's/^go//')
  case "$gov" in
    1.2[6-9]*|1.[3-9]*) ;;
    *) die "Go $gov is too old: kube-apiserver ${KUBE:-} needs Go >= 1.26. Install a newer Go and run 'npm run tools' again." ;;
  esac
fi

# One build at a time per tools cache (the parent of $work): a second caller (`svm dev up` while `npm test`
# builds, a test that needs Helm while the suite builds it beside the tests) waits here, then finds what the
# first one built, so each caller checks again what is missing once it holds the lock. Held until the calling
# script exits; its children (tools.sh runs scripts/tools.d/*) see SVM_TOOLS_LOCKED and do not wait on it.
build_lock() {
  if [[ -n ${SVM_TOOLS_DRY_RUN:-} || -n ${SVM_TOOLS_LOCKED:-} ]] || ! command -v flock >/dev/null 2>&1; then return 0; fi
  local root
  root=$(dirname "$work")
  exec 9>"$root/.build.lock"
  if ! flock -n 9; then
    say "another build into $root is running; waiting for it"
    flock 9
  fi
  export SVM_TOOLS_LOCKED=1
}

# Runs a long command with a heartbeat so a person (or CI log) sees progress.
# With SVM_TOOLS_DRY_RUN set (scripts/tools.sh --dry-run) it only says what it would run.
with_progress() {
  local what=$1; shift
  if [[ -n ${SVM_TOOLS_DRY_RUN:-} ]]; then
    say "would build $what: $*"
    return 0
  fi
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

