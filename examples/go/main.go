// An upgrade tool in Go that drives svm's migrateResource workflow through the
// Temporal Go SDK alone (docs/upgrade-tooling.md), with the types of contract.go
// written from contract/v1/*.schema.json.
//
//	upgradetool migrate <resource> [options-json]   start (or join) the migration, get the
//	                                                synchronous resolution, pause, read the
//	                                                progress, resume, wait for the result
//	upgradetool abort <resource> [reason]           abort the running migration, wait for its end
//
// <resource> is plural.group (gizmos.example.com) or a core plural (secrets).
// Environment: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_NAMESPACE
// (default "default"), SVM_TASK_QUEUE (default storage-version-migrator), SVM_CLUSTER
// (the cluster, when one namespace serves a fleet: docs/fleet.md).
// Prints "== step" lines, each followed by one JSON document; exits 2 when svm
// refuses the input (the reason on stderr), 1 on any other error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func print(step string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fail(err)
	}
	fmt.Printf("== %s\n%s\n", step, b)
}

func fail(err error) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && (app.Type() == "InvalidResource" || app.Type() == "InvalidInput") {
		fmt.Fprintf(os.Stderr, "refused (%s): %s\n", app.Type(), app.Error())
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "error: %v\n", err)
	os.Exit(1)
}

// cluster is the cluster the tool works on when one Temporal namespace serves several (SVM_CLUSTER); "" for one.
var cluster = os.Getenv("SVM_CLUSTER")

// workflowID is the contract's one workflow per resource (and cluster): every tool that starts it joins the same
// one. A named cluster's is migrate/<cluster>/<resource>.
func workflowID(resource string) string {
	if cluster != "" {
		return "migrate/" + cluster + "/" + resource
	}
	return "migrate/" + resource
}

// taskQueue is the queue the cluster's workers poll: <queue>/cluster/<cluster> for a named one.
func taskQueue() string {
	q := env("SVM_TASK_QUEUE", "storage-version-migrator")
	if cluster != "" {
		return q + "/cluster/" + cluster
	}
	return q
}

func update(ctx context.Context, c client.Client, id, name string, arg any, out any) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, out)
	}
	if err != nil {
		fail(err)
	}
}

func migrate(ctx context.Context, c client.Client, resource string, options *MigrationOptions) {
	id := workflowID(resource)
	input := StartInput{Resource: resource, Options: options}
	opts := client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: taskQueue(),
		// A second start of the same resource, from this tool or any other, joins the running migration.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	if cluster != "" {
		// The cluster in the input (its worker checks it) and in MigrationCluster (the UI filters on it).
		input.Cluster = &ClusterRef{Name: cluster}
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword("MigrationCluster").ValueSet(cluster))
	}
	start := c.NewWithStartWorkflowOperation(opts, "migrateResource", input)
	// Update-with-Start: the start and the synchronous answer (resolved, or refused with the reason) in one call.
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   "resolution",
			Args:         []any{Empty{}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		fail(err)
	}
	var resolved ResolvedResource
	if err := h.Get(ctx, &resolved); err != nil {
		fail(err)
	}
	run, err := start.Get(ctx)
	if err != nil {
		fail(err)
	}
	print("started", map[string]string{"workflowId": run.GetID(), "runId": run.GetRunID(), "contractVersion": ContractVersion})
	print("resolution", resolved)

	var steer SteerResult
	update(ctx, c, id, "pauseMigration", Empty{}, &steer)
	print("pause", steer)

	value, err := c.QueryWorkflow(ctx, id, "", "progress")
	if err != nil {
		fail(err)
	}
	var progress Progress
	if err := value.Get(&progress); err != nil {
		fail(err)
	}
	print("progress", progress)

	update(ctx, c, id, "resumeMigration", Empty{}, &steer)
	print("resume", steer)

	// The result of the run in progress; GetWorkflow follows continue-as-new to the last run.
	var result Progress
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &result); err != nil {
		fail(err)
	}
	print("result", result)
}

func abort(ctx context.Context, c client.Client, resource, reason string) {
	id := workflowID(resource)
	var steer SteerResult
	update(ctx, c, id, "abortMigration", AbortInput{Reason: reason}, &steer)
	print("abort", steer)
	var result Progress
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &result); err != nil {
		fail(err)
	}
	print("result", result)
}

func main() {
	if len(os.Args) < 3 || (os.Args[1] != "migrate" && os.Args[1] != "abort") {
		fmt.Fprintln(os.Stderr, "usage: upgradetool migrate <resource> [options-json] | upgradetool abort <resource> [reason]")
		os.Exit(64)
	}
	c, err := client.Dial(client.Options{
		HostPort:  env("TEMPORAL_ADDRESS", "localhost:7233"),
		Namespace: env("TEMPORAL_NAMESPACE", "default"),
		Logger:    quiet{},
	})
	if err != nil {
		fail(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	switch os.Args[1] {
	case "migrate":
		var options *MigrationOptions
		if len(os.Args) > 3 {
			options = &MigrationOptions{}
			if err := json.Unmarshal([]byte(os.Args[3]), options); err != nil {
				fail(fmt.Errorf("options-json: %w", err))
			}
		}
		migrate(ctx, c, os.Args[2], options)
	case "abort":
		reason := ""
		if len(os.Args) > 3 {
			reason = os.Args[3]
		}
		abort(ctx, c, os.Args[2], reason)
	}
}

// quiet keeps the SDK's own log lines off the terminal: the tool prints JSON documents only.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"temporal:", msg}, kv...)...)
}
