package httpapi

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/summaries"
)

// This file maps the fold of a thread (projections.Thread) to LangGraph's
// shapes: messages, thread states, threads and runs. Every function here is
// pure: the same log gives the same JSON.

// message is a LangGraph message object (a LangChain BaseMessage as
// JSON).
type message struct {
	Type              string          `json:"type"`
	Content           string          `json:"content"`
	ID                string          `json:"id"`
	Name              *string         `json:"name"`
	AdditionalKwargs  struct{}        `json:"additional_kwargs"`
	ResponseMetadata  struct{}        `json:"response_metadata"`
	ToolCalls         *[]struct{}     `json:"tool_calls,omitempty"`
	InvalidToolCalls  *[]struct{}     `json:"invalid_tool_calls,omitempty"`
	UsageMetadata     json.RawMessage `json:"usage_metadata,omitempty"`
	ToolCallChunks    *[]struct{}     `json:"tool_call_chunks,omitempty"`
	Example           bool            `json:"example"`
	artifactrPosition uint64
}

func humanMessage(m *projections.Message) message {
	return message{Type: "human", Content: m.Text, ID: m.MessageID}
}

func aiMessage(id, text string) message {
	none := []struct{}{}
	return message{Type: "ai", Content: text, ID: id, ToolCalls: &none, InvalidToolCalls: &none, UsageMetadata: json.RawMessage("null")}
}

// aiChunk is a streamed token chunk of run id's reply.
func aiChunk(id, text string) message {
	m := aiMessage(id, text)
	none := []struct{}{}
	m.ToolCallChunks = &none
	return m
}

// runText is what a run said: run_completed's output, else its outputs
// joined.
func runText(r *projections.Run) string {
	if r.Output != "" {
		return r.Output
	}
	return strings.Join(r.Outputs, "")
}

// messages returns the conversation of t: each consumed message as a human
// message where it was consumed (LangGraph adds a run's input to the state
// when the run starts), each completed run's reply as an AI message at its
// end. Rolled-back runs, with the messages they consumed, are left out; so
// are pending messages and failed runs' partial output.
func messages(t *projections.Thread) []message {
	rolled := map[string]bool{}
	runs := map[string]*projections.Run{}
	for _, r := range t.Runs {
		runs[r.ID] = r
		if r.RolledBack {
			rolled[r.ID] = true
		}
	}
	type item struct {
		pos, key uint64
		m        message
	}
	var items []item
	for i := range t.Messages {
		m := &t.Messages[i]
		if m.Consumed == nil || rolled[m.Consumed.RunID] {
			continue
		}
		items = append(items, item{m.Consumed.Seq, 2 * m.Seq, humanMessage(m)})
	}
	for _, r := range t.Runs {
		if r.Status != projections.RunCompleted || r.RolledBack {
			continue
		}
		items = append(items, item{r.EndSeq, 2*r.PromptSeq + 1, aiMessage(r.ID, runText(r))})
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.key, b.key)) })
	out := make([]message, len(items))
	for i, it := range items {
		out[i] = it.m
	}
	return out
}

// interrupt is a LangGraph interrupt: an open request.
type interrupt struct {
	Value string `json:"value"`
	ID    string `json:"id"`
}

func interrupts(t *projections.Thread) []interrupt {
	out := []interrupt{}
	for _, q := range t.OpenRequests() {
		out = append(out, interrupt{Value: q.Question, ID: q.ID})
	}
	return out
}

// values is the thread's state values: {"messages": [...]}.
func values(t *projections.Thread) map[string]any {
	return map[string]any{"messages": messages(t)}
}

// checkpoint names a point of a thread's log: its stream sequence.
type checkpoint struct {
	ThreadID      string  `json:"thread_id"`
	CheckpointNS  string  `json:"checkpoint_ns"`
	CheckpointID  string  `json:"checkpoint_id"`
	CheckpointMap *string `json:"checkpoint_map"`
}

func checkpointAt(thread string, seq uint64) checkpoint {
	return checkpoint{ThreadID: thread, CheckpointID: strconv.FormatUint(seq, 10)}
}

type task struct {
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	Error      *string     `json:"error"`
	Interrupts []interrupt `json:"interrupts"`
	Checkpoint *checkpoint `json:"checkpoint"`
	State      any         `json:"state"`
}

// threadState is LangGraph's ThreadState.
type threadState struct {
	Values           map[string]any `json:"values"`
	Next             []string       `json:"next"`
	Checkpoint       checkpoint     `json:"checkpoint"`
	Metadata         map[string]any `json:"metadata"`
	CreatedAt        *string        `json:"created_at"`
	ParentCheckpoint *checkpoint    `json:"parent_checkpoint"`
	Tasks            []task         `json:"tasks"`
	Interrupts       []interrupt    `json:"interrupts"`
}

// stateOf is the state of t as folded up to seq, its checkpoint; parent is
// the checkpoint before it (0: none), step its number.
func stateOf(t *projections.Thread, seq, parent uint64, step int, at time.Time) threadState {
	st := threadState{
		Values: values(t), Next: []string{}, Checkpoint: checkpointAt(t.ID, seq), Tasks: []task{},
		Metadata:   map[string]any{"source": "loop", "step": step, "thread_id": t.ID},
		Interrupts: interrupts(t),
	}
	for k, v := range t.Metadata {
		if _, taken := st.Metadata[k]; !taken {
			st.Metadata[k] = v
		}
	}
	if !at.IsZero() {
		s := isoTime(at)
		st.CreatedAt = &s
	}
	if parent != 0 {
		p := checkpointAt(t.ID, parent)
		st.ParentCheckpoint = &p
	}
	if len(st.Interrupts) > 0 {
		st.Next = []string{"agent"}
		for _, in := range st.Interrupts {
			st.Tasks = append(st.Tasks, task{ID: in.ID, Name: "agent", Interrupts: []interrupt{in}})
		}
	} else if t.ActiveRun != nil || len(t.Pending()) > 0 {
		st.Next = []string{"agent"}
	}
	return st
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

// threadStatus is LangGraph's status of a thread.
func threadStatus(t *projections.Thread) string {
	last := ""
	reason := ""
	if n := len(t.Runs); n > 0 {
		last, reason = string(t.Runs[n-1].Status), t.Runs[n-1].Reason
	}
	return statusOf4(t.ActiveRun != nil, len(t.OpenRequests()) > 0, len(t.Pending()) > 0, last, reason)
}

func summaryStatus(s *summaries.Summary) string {
	return statusOf4(s.ActiveRun != "", len(s.OpenRequests) > 0, s.Pending > 0, s.LastRunStatus, s.LastRunReason)
}

func statusOf4(active, asking, pending bool, lastStatus, lastReason string) string {
	switch {
	case asking:
		return "interrupted"
	case active || pending:
		return "busy"
	case lastStatus == string(projections.RunAbandoned),
		lastStatus == string(projections.RunFailed) && !cancelled(lastReason):
		return "error"
	}
	return "idle"
}

// cancelled reports whether a run_failed reason is a cancel or an
// interrupt, which LangGraph counts as "interrupted", not as an error.
func cancelled(reason string) bool {
	return reason == "cancelled" || reason == "interrupted" || strings.HasPrefix(reason, "cancelled") || strings.HasPrefix(reason, "interrupted")
}

// threadJSON is LangGraph's Thread.
type threadJSON struct {
	ThreadID       string                     `json:"thread_id"`
	CreatedAt      string                     `json:"created_at"`
	UpdatedAt      string                     `json:"updated_at"`
	StateUpdatedAt string                     `json:"state_updated_at"`
	Metadata       map[string]json.RawMessage `json:"metadata"`
	Status         string                     `json:"status"`
	Values         map[string]any             `json:"values"`
	Interrupts     map[string][]interrupt     `json:"interrupts"`
	Config         map[string]any             `json:"config"`
	Error          *string                    `json:"error"`
}

func threadOf(t *projections.Thread) threadJSON {
	j := threadJSON{
		ThreadID: t.ID, CreatedAt: isoTime(t.Created), UpdatedAt: isoTime(t.LastActivity), StateUpdatedAt: isoTime(t.LastActivity),
		Metadata: metadataOf(t.Metadata), Status: threadStatus(t), Values: values(t),
		Interrupts: map[string][]interrupt{}, Config: map[string]any{},
	}
	for _, in := range interrupts(t) {
		j.Interrupts[in.ID] = []interrupt{in}
	}
	if j.Status == "error" {
		r := t.Runs[len(t.Runs)-1].Reason
		j.Error = &r
	}
	return j
}

func metadataOf(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}
