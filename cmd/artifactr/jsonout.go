package main

import (
	"encoding/json"
	"io"

	"github.com/artifactr/artifactr/internal/bench"
)

// writeJSON prints v as one indented JSON document: what --json prints
// for a command that does not stream.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return errOrNil(enc.Encode(v))
}

// The --json shapes of the commands that write, with stable snake_case
// names; main.go's package doc lists them.
type (
	// postedJSON is what post --json prints; with --wait, run is the run
	// that took the message, else null.
	postedJSON struct {
		Thread    string       `json:"thread"`
		Seq       uint64       `json:"seq"`
		MessageID string       `json:"message_id"` // "" when post made a fresh id
		Duplicate bool         `json:"duplicate"`
		Run       *waitRunJSON `json:"run"`
	}
	// waitRunJSON is the run post --wait waited for.
	waitRunJSON struct {
		RunID     string `json:"run_id"`
		Status    string `json:"status"`   // completed, failed, abandoned, or active when it asks
		Output    string `json:"output"`   // its outputs joined, once it completed
		Reason    string `json:"reason"`   // why it failed or was abandoned
		Question  string `json:"question"` // the request it opened, when it asks
		RequestID string `json:"request_id"`
	}
	forkedJSON struct {
		Thread    string `json:"thread"`
		Source    string `json:"source"`
		SourceSeq uint64 `json:"source_seq"`
		Seq       uint64 `json:"seq"`
		Messages  int    `json:"messages"`
		Runs      int    `json:"runs"`
		Duplicate bool   `json:"duplicate"`
	}
	cancelJSON struct {
		Thread    string `json:"thread"`
		Seq       uint64 `json:"seq"`
		RunID     string `json:"run_id"`
		RequestID string `json:"request_id"` // "" when cancel made a fresh id
	}
	configuredJSON struct {
		Thread   string `json:"thread"`
		Seq      uint64 `json:"seq"`
		Strategy string `json:"strategy"`
	}
	initJSON struct {
		URL           string `json:"url"`
		Stream        string `json:"stream"`
		SummaryBucket string `json:"summaries_bucket"`
		Replicas      int    `json:"replicas"`
	}
	versionJSON struct {
		Version  string `json:"version"`
		Revision string `json:"revision"` // "" when the build has no VCS information
		Schema   string `json:"schema"`
		Go       string `json:"go"`
	}
	// The benchmarks' figures (internal/bench).
	benchTurnsJSON = bench.TurnsResult
	benchHTTPJSON  = bench.HTTPResult
	benchAuditJSON = bench.AuditResult
	demoJSON       struct {
		OK    bool   `json:"ok"`
		Error string `json:"error,omitempty"`
	}
	rebuiltJSON struct {
		Bucket       string  `json:"summaries_bucket"`
		Partition    *int    `json:"partition,omitempty"` // with partitions
		Events       uint64  `json:"events"`
		Writes       uint64  `json:"writes"`
		Checkpoint   uint64  `json:"checkpoint"`
		Seconds      float64 `json:"seconds"`
		EventsPerSec float64 `json:"events_per_second"`
	}
)
