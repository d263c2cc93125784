#!/usr/bin/env bash
# Aborts the running migration of one resource with the Temporal CLI and waits
# until it has stopped: an abort is acknowledged (or refused with the reason,
# e.g. when the migration has ended), and an aborted migration records nothing
# (CRD storedVersions and StorageStates stay as they were).
#
#   examples/shell/abort.sh gizmos.example.com "rollback of the upgrade"
set -euo pipefail
resource=${1:?usage: abort.sh <plural.group> [reason]}
reason=${2:-aborted by an upgrade tool}
temporal=${TEMPORAL_CLI:-temporal}
id="migrate/$resource"
echo "== abort"
# The reason as a JSON string: backslashes and quotes escaped.
json_reason=$(printf '%s' "$reason" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
"$temporal" workflow update execute --workflow-id "$id" --name abortMigration --input "{\"reason\": \"$json_reason\"}" -o json
echo "== result"
"$temporal" workflow result --workflow-id "$id" -o json
