package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/summaries"
)

// newUUID returns a random (version 4) UUID: the id of a thread or message
// the client did not name.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func validThread(id string) error {
	if err := events.ValidateThreadID(id); err != nil {
		return errorf(http.StatusUnprocessableEntity, "thread_id %q: artifactr thread ids are 1 to 128 characters from [A-Za-z0-9_-] (a UUID fits)", id)
	}
	return nil
}

// loadThread folds thread id: 404 when it has no events or was deleted.
func (s *Server) loadThread(ctx context.Context, id string) (*projections.Thread, error) {
	if err := validThread(id); err != nil {
		return nil, err
	}
	t, err := s.c.Thread(ctx, id)
	switch {
	case errors.Is(err, client.ErrNoEvents):
		return nil, errorf(http.StatusNotFound, "thread %s not found", id)
	case err != nil:
		return nil, err
	case t.DeletedSeq != 0:
		return nil, errorf(http.StatusNotFound, "thread %s was deleted (thread_deleted at %d; its events are kept, the stream is the audit log)", id, t.DeletedSeq)
	}
	s.caughtUp(ctx, id, t.LastSeq)
	return t, nil
}

// threadExists reports whether thread id has events, and whether it was
// deleted.
func (s *Server) threadExists(ctx context.Context, id string) (t *projections.Thread, exists bool, err error) {
	t, err = s.c.Thread(ctx, id)
	switch {
	case errors.Is(err, client.ErrNoEvents):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return t, true, nil
}

type threadCreate struct {
	ThreadID   string                     `json:"thread_id"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
	IfExists   string                     `json:"if_exists"`
	Supersteps []json.RawMessage          `json:"supersteps"`
	TTL        json.RawMessage            `json:"ttl"`
	GraphID    string                     `json:"graph_id"`
}

func metadataJSON(m map[string]json.RawMessage) (string, error) {
	if m == nil {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", errorf(http.StatusUnprocessableEntity, "metadata: %v", err)
	}
	return string(b), nil
}

func (s *Server) createThread(w http.ResponseWriter, r *http.Request) error {
	var q threadCreate
	if err := decode(r, &q, true); err != nil {
		return err
	}
	switch {
	case len(q.Supersteps) > 0:
		return errorf(http.StatusUnprocessableEntity, "supersteps: artifactr threads are made of posted messages; post them as runs")
	case len(q.TTL) > 0 && string(q.TTL) != "null":
		return errorf(http.StatusUnprocessableEntity, "ttl: artifactr keeps every event (the stream is the audit log); threads do not expire")
	case q.IfExists != "" && q.IfExists != "raise" && q.IfExists != "do_nothing":
		return errorf(http.StatusUnprocessableEntity, "if_exists %q: want raise or do_nothing", q.IfExists)
	}
	id := cmp.Or(q.ThreadID, newUUID())
	if err := validThread(id); err != nil {
		return err
	}
	meta, err := metadataJSON(q.Metadata)
	if err != nil {
		return err
	}
	t, exists, err := s.threadExists(r.Context(), id)
	if err != nil {
		return err
	}
	if exists {
		switch {
		case t.DeletedSeq != 0:
			return errorf(http.StatusConflict, "thread %s was deleted; its events are kept for the audit, so its id cannot be reused", id)
		case q.IfExists == "do_nothing":
			writeJSON(w, http.StatusOK, threadOf(t))
			return nil
		}
		return errorf(http.StatusConflict, "thread %s already exists", id)
	}
	if _, dup, err := s.c.CreateThread(r.Context(), id, meta); err != nil {
		return err
	} else if dup && q.IfExists != "do_nothing" {
		return errorf(http.StatusConflict, "thread %s already exists", id)
	}
	t, err = s.loadThread(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, threadOf(t))
	return nil
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	t, err := s.loadThread(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, threadOf(t))
	return nil
}

type threadPatch struct {
	Metadata map[string]json.RawMessage `json:"metadata"`
	TTL      json.RawMessage            `json:"ttl"`
}

func (s *Server) patchThread(w http.ResponseWriter, r *http.Request) error {
	var q threadPatch
	if err := decode(r, &q, false); err != nil {
		return err
	}
	if len(q.TTL) > 0 && string(q.TTL) != "null" {
		return errorf(http.StatusUnprocessableEntity, "ttl: artifactr threads do not expire")
	}
	id := r.PathValue("thread_id")
	if _, err := s.loadThread(r.Context(), id); err != nil {
		return err
	}
	if len(q.Metadata) > 0 {
		meta, err := metadataJSON(q.Metadata)
		if err != nil {
			return err
		}
		if _, err := s.c.SetMetadata(r.Context(), id, meta, ""); err != nil {
			return err
		}
	}
	t, err := s.loadThread(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, threadOf(t))
	return nil
}

// deleteThread writes a thread_deleted tombstone: the thread is 404 from
// then on. It is not erasure: every event stays in the stream.
func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("thread_id")
	if _, err := s.loadThread(r.Context(), id); err != nil {
		return err
	}
	seq, err := s.c.DeleteThread(r.Context(), id)
	if err != nil {
		return err
	}
	s.caughtUp(r.Context(), id, seq)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// copyThread forks the thread at its latest event into a new thread, and
// copies its metadata.
func (s *Server) copyThread(w http.ResponseWriter, r *http.Request) error {
	if err := decode(r, &struct{}{}, true); err != nil {
		return err
	}
	src, err := s.loadThread(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	t, err := s.fork(r.Context(), src, src.LastSeq, newUUID())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, threadOf(t))
	return nil
}

// fork copies src's history up to seq into thread id, with src's metadata.
func (s *Server) fork(ctx context.Context, src *projections.Thread, seq uint64, id string) (*projections.Thread, error) {
	if _, err := s.c.Fork(ctx, src.ID, seq, id); err != nil {
		return nil, err
	}
	if len(src.Metadata) > 0 {
		meta, err := metadataJSON(src.Metadata)
		if err != nil {
			return nil, err
		}
		if _, err := s.c.SetMetadata(ctx, id, meta, "copy"); err != nil {
			return nil, err
		}
	}
	return s.loadThread(ctx, id)
}

// A checkpoint is a stream sequence where the thread's state (its values
// or its interrupts) changed: a message taken (a run's input), a run's
// reply, a request opened, a rollback, a fork. History lists one state per
// checkpoint; the current state is at the newest.

// stateChanging reports whether events of type t can change the state.
func stateChanging(t events.Type) bool {
	switch t {
	case events.TypeRunStarted, events.TypeAnswerGiven, events.TypeSteeringGiven, events.TypeRunCompleted,
		events.TypeRunFailed, events.TypeRunAbandoned, events.TypeRequestOpened, events.TypeThreadForked,
		events.TypeRunInterrupted, events.TypeCancelRequested:
		return true
	}
	return false
}

// stateSig is what a checkpoint compares.
func stateSig(t *projections.Thread) [3]int {
	n := 0
	for _, r := range t.Runs {
		if r.Status == projections.RunCompleted {
			n++
		}
	}
	return [3]int{len(messages(t)), len(t.OpenRequests()), n}
}

// foldCheckpoints folds envs and calls at with the fold after each
// checkpoint, in stream order.
func foldCheckpoints(id string, envs []events.Envelope, at func(t *projections.Thread, env events.Envelope)) *projections.Thread {
	t := projections.New(id)
	var sig [3]int
	for _, env := range envs {
		t.Apply(env)
		if !stateChanging(events.TypeOf(env.Event)) {
			continue
		}
		if now := stateSig(t); now != sig {
			sig = now
			at(t, env)
		}
	}
	return t
}

// parentOf returns the newest checkpoint before seq, 0 when none.
func parentOf(cps []uint64, seq uint64) uint64 {
	i, _ := slices.BinarySearch(cps, seq)
	if i == 0 {
		return 0
	}
	return cps[i-1]
}

// loadEvents returns thread id's events: 404 when it has none or was
// deleted.
func (s *Server) loadEvents(ctx context.Context, id string) ([]events.Envelope, error) {
	if _, err := s.loadThread(ctx, id); err != nil {
		return nil, err
	}
	envs, err := s.c.Events(ctx, id)
	if err == nil && len(envs) > 0 {
		s.caughtUp(ctx, id, envs[len(envs)-1].Seq)
	}
	return envs, err
}

func (s *Server) getState(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("thread_id")
	envs, err := s.loadEvents(r.Context(), id)
	if err != nil {
		return err
	}
	var cps []uint64
	var at time.Time
	t := foldCheckpoints(id, envs, func(_ *projections.Thread, env events.Envelope) {
		cps = append(cps, env.Seq)
		at = env.Stored
	})
	seq := envs[0].Seq
	if n := len(cps); n > 0 {
		seq = cps[n-1]
	} else {
		at = envs[0].Stored
	}
	writeJSON(w, http.StatusOK, stateOf(t, seq, parentOf(cps, seq), len(cps), at))
	return nil
}

func parseCheckpoint(id string) (uint64, error) {
	seq, err := strconv.ParseUint(id, 10, 64)
	if err != nil || seq == 0 {
		return 0, errorf(http.StatusUnprocessableEntity, "checkpoint_id %q: artifactr checkpoints are stream sequences, such as \"12\"", id)
	}
	return seq, nil
}

// stateAt answers the state of thread at checkpoint id.
func (s *Server) stateAt(w http.ResponseWriter, r *http.Request, thread, id string) error {
	seq, err := parseCheckpoint(id)
	if err != nil {
		return err
	}
	envs, err := s.loadEvents(r.Context(), thread)
	if err != nil {
		return err
	}
	if last := envs[len(envs)-1].Seq; seq > last || seq < envs[0].Seq {
		return errorf(http.StatusNotFound, "checkpoint %d is not in thread %s (its events are at %d..%d)", seq, thread, envs[0].Seq, last)
	}
	i, _ := slices.BinarySearchFunc(envs, seq, func(e events.Envelope, s uint64) int { return cmp.Compare(e.Seq, s) })
	if i < len(envs) && envs[i].Seq == seq {
		i++
	}
	var cps []uint64
	at := envs[0].Stored
	t := foldCheckpoints(thread, envs[:i], func(_ *projections.Thread, env events.Envelope) {
		cps = append(cps, env.Seq)
		at = env.Stored
	})
	writeJSON(w, http.StatusOK, stateOf(t, seq, parentOf(cps, seq), len(cps), at))
	return nil
}

func (s *Server) getStateAt(w http.ResponseWriter, r *http.Request) error {
	return s.stateAt(w, r, r.PathValue("thread_id"), r.PathValue("checkpoint_id"))
}

type checkpointRef struct {
	ThreadID      string          `json:"thread_id"`
	CheckpointID  string          `json:"checkpoint_id"`
	CheckpointNS  string          `json:"checkpoint_ns"`
	CheckpointMap json.RawMessage `json:"checkpoint_map"`
}

func (s *Server) postStateAt(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		Checkpoint checkpointRef `json:"checkpoint"`
		Subgraphs  bool          `json:"subgraphs"`
		Select     []string      `json:"select"`
	}
	if err := decode(r, &q, false); err != nil {
		return err
	}
	return s.stateAt(w, r, r.PathValue("thread_id"), q.Checkpoint.CheckpointID)
}

type historyQuery struct {
	Limit      *int                       `json:"limit"`
	Before     json.RawMessage            `json:"before"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
	Checkpoint *checkpointRef             `json:"checkpoint"`
	Select     []string                   `json:"select"`
}

// beforeSeq reads history's before: a checkpoint id, or a config whose
// configurable names one.
func beforeSeq(raw json.RawMessage) (uint64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		var c struct {
			Configurable checkpointRef `json:"configurable"`
			checkpointRef
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return 0, errorf(http.StatusUnprocessableEntity, "before: want a checkpoint id or a config")
		}
		id = cmp.Or(c.Configurable.CheckpointID, c.CheckpointID)
	}
	return parseCheckpoint(id)
}

// history lists the thread's states, one per run end, newest first.
func (s *Server) history(w http.ResponseWriter, r *http.Request) error {
	var q historyQuery
	if r.Method == http.MethodGet {
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return errorf(http.StatusUnprocessableEntity, "limit %q: want a number", v)
			}
			q.Limit = &n
		}
		if v := r.URL.Query().Get("before"); v != "" {
			q.Before, _ = json.Marshal(v)
		}
	} else if err := decode(r, &q, true); err != nil {
		return err
	}
	limit, err := pageLimit(q.Limit, 0)
	if err != nil {
		return err
	}
	before, err := beforeSeq(q.Before)
	if err != nil {
		return err
	}
	var upTo uint64
	if q.Checkpoint != nil && q.Checkpoint.CheckpointID != "" {
		if upTo, err = parseCheckpoint(q.Checkpoint.CheckpointID); err != nil {
			return err
		}
	}
	id := r.PathValue("thread_id")
	envs, err := s.loadEvents(r.Context(), id)
	if err != nil {
		return err
	}
	var states []threadState
	var prev uint64
	foldCheckpoints(id, envs, func(t *projections.Thread, env events.Envelope) {
		states = append(states, stateOf(t, env.Seq, prev, len(states)+1, env.Stored))
		prev = env.Seq
	})
	slices.Reverse(states)
	out := []threadState{}
	for _, st := range states {
		seq, _ := strconv.ParseUint(st.Checkpoint.CheckpointID, 10, 64)
		if (before != 0 && seq >= before) || (upTo != 0 && seq > upTo) || !metadataMatchesRaw(st.Metadata, q.Metadata) {
			continue
		}
		out = append(out, st)
		if len(out) == limit {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func metadataMatchesRaw(have map[string]any, want map[string]json.RawMessage) bool {
	for k, v := range want {
		hv, ok := have[k]
		if !ok {
			return false
		}
		a, err := json.Marshal(hv)
		if err != nil || !jsonEqual(a, v) {
			return false
		}
	}
	return true
}

type threadSearch struct {
	Metadata  map[string]json.RawMessage `json:"metadata"`
	IDs       []string                   `json:"ids"`
	Limit     *int                       `json:"limit"`
	Offset    int                        `json:"offset"`
	Status    string                     `json:"status"`
	SortBy    string                     `json:"sort_by"`
	SortOrder string                     `json:"sort_order"`
	Select    []string                   `json:"select"`
	Values    map[string]json.RawMessage `json:"values"`
	Extract   json.RawMessage            `json:"extract"`
}

// matchingThreads filters and sorts the summaries of the read model.
func (s *Server) matchingThreads(ctx context.Context, q threadSearch) ([]summaries.Summary, error) {
	switch {
	case len(q.Values) > 0:
		return nil, errorf(http.StatusUnprocessableEntity, "values: search by state values is not supported; search by metadata or status")
	case q.Status != "" && !slices.Contains([]string{"idle", "busy", "interrupted", "error"}, q.Status):
		return nil, errorf(http.StatusUnprocessableEntity, "status %q: want idle, busy, interrupted or error", q.Status)
	case q.SortOrder != "" && q.SortOrder != "asc" && q.SortOrder != "desc":
		return nil, errorf(http.StatusUnprocessableEntity, "sort_order %q: want asc or desc", q.SortOrder)
	}
	var key func(a, b *summaries.Summary) int
	switch q.SortBy {
	case "", "created_at":
		key = func(a, b *summaries.Summary) int { return a.Created.Compare(b.Created) }
	case "updated_at", "state_updated_at":
		key = func(a, b *summaries.Summary) int { return a.LastActivity.Compare(b.LastActivity) }
	case "thread_id":
		key = func(a, b *summaries.Summary) int { return strings.Compare(a.Thread, b.Thread) }
	case "status":
		key = func(a, b *summaries.Summary) int { return strings.Compare(summaryStatus(a), summaryStatus(b)) }
	default:
		return nil, errorf(http.StatusUnprocessableEntity, "sort_by %q: want created_at, updated_at, thread_id or status", q.SortBy)
	}
	snap, err := s.c.Summaries(ctx, s.cfg.Summaries)
	if err != nil {
		return nil, err
	}
	s.caughtUpAll(ctx, snap.LastSeqs)
	have := make(map[string]uint64, len(snap.Summaries))
	idx := make(map[string]int, len(snap.Summaries))
	for i, sm := range snap.Summaries {
		have[sm.Thread], idx[sm.Thread] = sm.LastSeq, i
	}
	all := snap.Summaries
	for _, sm := range s.hub.newer(have) {
		if i, ok := idx[sm.Thread]; ok {
			all[i] = sm
		} else {
			all = append(all, sm)
		}
	}
	var out []summaries.Summary
	for i := range all {
		sm := &all[i]
		if sm.DeletedSeq != 0 || (len(q.IDs) > 0 && !slices.Contains(q.IDs, sm.Thread)) ||
			(q.Status != "" && summaryStatus(sm) != q.Status) || !rawMatches(sm.Metadata, q.Metadata) {
			continue
		}
		out = append(out, *sm)
	}
	slices.SortStableFunc(out, func(a, b summaries.Summary) int {
		c := cmp.Or(key(&a, &b), strings.Compare(a.Thread, b.Thread))
		if q.SortOrder != "asc" {
			c = -c
		}
		return c
	})
	return out, nil
}

// rawMatches reports whether have holds every key of want with an equal
// JSON value.
func rawMatches(have, want map[string]json.RawMessage) bool {
	for k, v := range want {
		hv, ok := have[k]
		if !ok || !jsonEqual(hv, v) {
			return false
		}
	}
	return true
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func (s *Server) searchThreads(w http.ResponseWriter, r *http.Request) error {
	var q threadSearch
	if err := decode(r, &q, true); err != nil {
		return err
	}
	limit, err := pageLimit(q.Limit, q.Offset)
	if err != nil {
		return err
	}
	all, err := s.matchingThreads(r.Context(), q)
	if err != nil {
		return err
	}
	out := []threadJSON{}
	for _, sm := range page(all, q.Offset, limit) {
		// Only the page's threads are read, for their values.
		t, err := s.c.Thread(r.Context(), sm.Thread)
		if err != nil {
			return err
		}
		out = append(out, threadOf(t))
	}
	w.Header().Set("X-Pagination-Total", strconv.Itoa(len(all)))
	if q.Offset+limit < len(all) {
		w.Header().Set("X-Pagination-Next", strconv.Itoa(q.Offset+limit))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) countThreads(w http.ResponseWriter, r *http.Request) error {
	var q threadSearch
	if err := decode(r, &q, true); err != nil {
		return err
	}
	all, err := s.matchingThreads(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, len(all))
	return nil
}
