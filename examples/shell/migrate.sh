#!/usr/bin/env bash
# Migrates one resource with nothing but the Temporal CLI (docs/upgrade-tooling.md):
# starts it (or joins the migration of it already running) and gets the synchronous
# answer in the same call (resolved, or refused with the reason), pauses and resumes it, reads its
# progress, and waits for its result. Prints JSON documents (contract/v1/).
#
#   TEMPORAL_ADDRESS=host:7233 examples/shell/migrate.sh gizmos.example.com
#
# Environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE (the CLI's own), TEMPORAL_CLI
# (default: temporal), SVM_TASK_QUEUE (default: storage-version-migrator),
# SVM_OPTIONS (JSON migration options, default {}).
set -euo pipefail
resource=${1:?usage: migrate.sh <plural.group | core plural, e.g. gizmos.example.com or secrets>}
temporal=${TEMPORAL_CLI:-temporal}
queue=${SVM_TASK_QUEUE:-storage-version-migrator}
id="migrate/$resource" # one workflow per resource: every tool that starts it joins the same one

echo "== resolution"
# One call (Update-with-Start): the start and its synchronous answer, which a refused start (an unknown resource, a
# subresource, a bad option) gives before the workflow closes; an update sent after a plain start may find it closed.
"$temporal" workflow execute-update-with-start --type migrateResource --task-queue "$queue" --workflow-id "$id" \
  --id-conflict-policy UseExisting \
  --input "{\"resource\": \"$resource\", \"options\": ${SVM_OPTIONS:-{\}}}" \
  --update-name resolution --update-input '{}' -o json
echo "== pause"
"$temporal" workflow update execute --workflow-id "$id" --name pauseMigration --input '{}' -o json
echo "== progress"
"$temporal" workflow query --workflow-id "$id" --name progress -o json
echo "== resume"
"$temporal" workflow update execute --workflow-id "$id" --name resumeMigration --input '{}' -o json
echo "== result"
"$temporal" workflow result --workflow-id "$id" -o json
