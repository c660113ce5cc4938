package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/artifactr/artifactr/internal/bench"
)

// ms is d in milliseconds, for the figures of --json.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
	// benchTurnsJSON is bench turns --json: the figures the text lines
	// give, in milliseconds and per second.
	benchTurnsJSON struct {
		Mode              string           `json:"mode"` // "open" or "closed-loop"
		Fsync             bool             `json:"fsync"`
		Phases            []benchPhaseJSON `json:"phases"`
		RawAppendsPerSec  float64          `json:"raw_appends_per_second,omitempty"`
		EventsPerRawRatio float64          `json:"events_per_raw_ratio,omitempty"`
	}
	benchPhaseJSON struct {
		Name            string  `json:"name"`
		Threads         int     `json:"threads"`
		Turns           int     `json:"turns"`
		TurnsPerSecond  float64 `json:"turns_per_second"`
		Events          int     `json:"events,omitempty"`
		EventsPerSecond float64 `json:"events_per_second,omitempty"`
		CPUMsPerTurn    float64 `json:"cpu_ms_per_turn,omitempty"`
		StartP50Ms      float64 `json:"start_p50_ms"`
		StartP99Ms      float64 `json:"start_p99_ms"`
		EndP50Ms        float64 `json:"end_p50_ms"`
		EndP99Ms        float64 `json:"end_p99_ms"`
	}
	// benchHTTPJSON is bench http --json: the phases in the order run
	// (nats-direct and http in turns, nats-direct last), the medians, and
	// their ratio.
	benchHTTPJSON struct {
		Fsync                    bool             `json:"fsync"`
		Phases                   []benchPhaseJSON `json:"phases"`
		HTTPTurnsPerSecond       float64          `json:"http_turns_per_second"`
		NATSDirectTurnsPerSecond float64          `json:"nats_direct_turns_per_second"`
		HTTPServerCPUMsPerTurn   float64          `json:"http_server_cpu_ms_per_turn"`
		HTTPClientCPUMsPerTurn   float64          `json:"http_client_cpu_ms_per_turn"`
		Ratio                    float64          `json:"http_over_nats_direct"`
	}
	benchAuditJSON = bench.AuditResult
	demoJSON       struct {
		OK    bool   `json:"ok"`
		Error string `json:"error,omitempty"`
	}
	rebuiltJSON struct {
		Bucket       string  `json:"summaries_bucket"`
		Events       uint64  `json:"events"`
		Writes       uint64  `json:"writes"`
		Checkpoint   uint64  `json:"checkpoint"`
		Seconds      float64 `json:"seconds"`
		EventsPerSec float64 `json:"events_per_second"`
	}
)
