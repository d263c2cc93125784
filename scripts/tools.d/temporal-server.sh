#!/usr/bin/env bash
# Temporal server on PostgreSQL (svm dev up --temporal server): the server
# (go.temporal.io/server cmd/server), its SQL schema tool (cmd/tools/sql) and
# the Web UI server (github.com/temporalio/ui-server/v2), each built from its Go
# module into the tools cache once per version, like the other servers. The
# modules say `go 1.26.10` in go.mod; GOTOOLCHAIN names that toolchain so the go
# command fetches it through the module proxy. The PostgreSQL schema files
# (schema/postgresql/v12 in the server module) are copied next to the binaries.
# The UI server is v2.55.0, not the newest: v2.56.x and v2.58.x need
# github.com/labstack/echo/v4 v4.16.1 (and v2.58 go.temporal.io/api v1.64.0),
# which the module proxy refuses here ("403 Forbidden: This module version is
# not available").
# Prints temporal-server=, temporal-sql-tool=, temporal-schema=, temporal-ui-server=.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SVM_TOOLS_BIN:-${SVM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svm-tools}/bin}
work=${SVM_TOOLS_WORK:-$(dirname "$bin")/build}
mkdir -p "$bin" "$work"
source "$here/scripts/tools-lib.sh"

ver() { node -p "require('$here/tools/versions.json').$1"; }
SERVER=$(ver temporalServer)
UI=$(ver temporalUi)
TOOLCHAIN=$(ver temporalServerGo)
schema="$(dirname "$bin")/temporal-schema-$SERVER"

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=$TOOLCHAIN

build_server() {
  local d="$work/temporal-server-$SERVER"
  rm -rf "$d" && mkdir -p "$d"
  GOBIN="$d" go install -trimpath -ldflags "-s -w" \
    "go.temporal.io/server/cmd/server@$SERVER" "go.temporal.io/server/cmd/tools/sql@$SERVER"
  local src
  src=$(go mod download -json "go.temporal.io/server@$SERVER" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).Dir))')
  rm -rf "$schema.tmp" && mkdir -p "$schema.tmp"
  cp -r "$src/schema/postgresql" "$schema.tmp/"
  chmod -R u+w,a+rX "$schema.tmp"
  rm -rf "$schema" && mv "$schema.tmp" "$schema"
  mv "$d/sql" "$bin/temporal-sql-tool-$SERVER"
  mv "$d/server" "$bin/temporal-server-$SERVER"
}

build_ui() {
  local d="$work/temporal-ui-server-$UI"
  rm -rf "$d" && mkdir -p "$d"
  GOBIN="$d" go install -trimpath -ldflags "-s -w" "github.com/temporalio/ui-server/v2/cmd/server@$UI"
  mv "$d/server" "$bin/temporal-ui-server-$UI"
}

server_built() { [[ -x "$bin/temporal-server-$SERVER" && -x "$bin/temporal-sql-tool-$SERVER" && -d "$schema" ]]; }
ui_built() { [[ -x "$bin/temporal-ui-server-$UI" ]]; }
if ! server_built || ! ui_built; then
  build_lock
  server_built || with_progress "temporal-server-$SERVER" build_server
  ui_built || with_progress "temporal-ui-server-$UI" build_ui
fi

echo "temporal-server=$bin/temporal-server-$SERVER"
echo "temporal-sql-tool=$bin/temporal-sql-tool-$SERVER"
echo "temporal-schema=$schema/postgresql/v12"
echo "temporal-ui-server=$bin/temporal-ui-server-$UI"
