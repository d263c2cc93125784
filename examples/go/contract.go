package main

// The types of svm's workflow contract, written from the published JSON Schema
// (contract/v1/*.schema.json). Field names are the schema's property names; a
// pointer or `omitempty` marks a property the schema does not require.

// ContractVersion is the contract these types were written from (x-contract-version).
const ContractVersion = "1"

// StartInput is contract/v1/start-input.schema.json: the minimal start names the
// resource as plural.group ("gizmos.example.com") or a core plural ("secrets").
type StartInput struct {
	Resource         string            `json:"resource"`
	Group            *string           `json:"group,omitempty"`
	Options          *MigrationOptions `json:"options,omitempty"`
	MigrationObjects []string          `json:"migrationObjects,omitempty"`
	// Cluster names the cluster when one Temporal namespace serves several (docs/fleet.md): the workflow ID is then
	// migrate/<cluster>/<resource> and the task queue <queue>/cluster/<cluster>.
	Cluster *ClusterRef `json:"cluster,omitempty"`
}

// ClusterRef is the cluster a workflow works on: its name, and the uid of its kube-system namespace once known.
type ClusterRef struct {
	Name string  `json:"name"`
	UID  *string `json:"uid,omitempty"`
}

// MigrationOptions is contract/v1/options.schema.json; every field is optional.
type MigrationOptions struct {
	ChunkSize                  *int `json:"chunkSize,omitempty"`
	PageBytes                  *int `json:"pageBytes,omitempty"`
	Concurrency                *int `json:"concurrency,omitempty"`
	QPS                        *int `json:"qps,omitempty"`
	MaxChunksPerRun            *int `json:"maxChunksPerRun,omitempty"`
	HeartbeatTimeoutSeconds    *int `json:"heartbeatTimeoutSeconds,omitempty"`
	TaskStartTimeoutSeconds    *int `json:"taskStartTimeoutSeconds,omitempty"`
	AgreementPollSeconds       *int `json:"agreementPollSeconds,omitempty"`
	UnverifiedAgreementSeconds *int `json:"unverifiedAgreementSeconds,omitempty"`
}

// ResolvedResource is contract/v1/update-resolution-result.schema.json.
type ResolvedResource struct {
	Group              string `json:"group"`
	Resource           string `json:"resource"`
	Version            string `json:"version"`
	Kind               string `json:"kind"`
	Namespaced         bool   `json:"namespaced"`
	StorageVersionHash string `json:"storageVersionHash"`
	Custom             bool   `json:"custom"`
}

// Counters is the counters property of contract/v1/progress.schema.json.
type Counters struct {
	Migrated     int64 `json:"migrated"`
	Rewritten    int64 `json:"rewritten"`
	Conflicts    int64 `json:"conflicts"`
	NotFound     int64 `json:"notFound"`
	Failed       int64 `json:"failed"`
	Chunks       int64 `json:"chunks"`
	ListRestarts int64 `json:"listRestarts"`
	TokenResumes int64 `json:"tokenResumes"`
}

// ObjectFailure is one item of the failures property of contract/v1/progress.schema.json.
type ObjectFailure struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Reason    string `json:"reason"`
}

// Progress is contract/v1/progress.schema.json (the "progress" query) and
// contract/v1/result.schema.json (the workflow's result).
type Progress struct {
	Resource             string          `json:"resource"`
	Phase                string          `json:"phase"`
	Counters             Counters        `json:"counters"`
	Failures             []ObjectFailure `json:"failures"`
	ContinueTokenPresent bool            `json:"continueTokenPresent"`
	RemainingEstimate    *int64          `json:"remainingEstimate,omitempty"`
	ObjectsPerSecond     float64         `json:"objectsPerSecond"`
	StartedAt            float64         `json:"startedAt"`
	Runs                 int64           `json:"runs"`
	Restarts             int64           `json:"restarts"`
	Message              string          `json:"message,omitempty"`
	Record               *PassRecord     `json:"record,omitempty"`
	MigrationObjects     []string        `json:"migrationObjects"`
}

// PassRecord is the record property of contract/v1/result.schema.json: on a
// Succeeded result, the whole pass a verdict rests on.
type PassRecord struct {
	By                 string   `json:"by"`
	Object             string   `json:"object,omitempty"`
	EncodingVersion    string   `json:"encodingVersion"`
	StorageVersionHash string   `json:"storageVersionHash,omitempty"`
	Verified           bool     `json:"verified"`
	Checked            string   `json:"checked"`
	Token              string   `json:"token"`
	At                 *float64 `json:"at,omitempty"`
}

// SteerResult is contract/v1/update-steer-result.schema.json: the answer of
// pauseMigration, resumeMigration and abortMigration.
type SteerResult struct {
	Progress
	Paused         bool   `json:"paused"`
	AbortRequested string `json:"abortRequested,omitempty"`
}

// AbortInput is contract/v1/update-abortMigration-input.schema.json (and signal-abort).
type AbortInput struct {
	Reason string `json:"reason,omitempty"`
}

// Empty is the input of pauseMigration, resumeMigration and resolution: the Go
// SDK sends exactly one argument, and the contract takes one JSON object.
type Empty struct{}
