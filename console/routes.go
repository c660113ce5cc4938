package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/projections/summaries"
	"github.com/artifactr/artifactr/spec"
)

// maxPage bounds a page of the thread list.
const maxPage = 200

// threadRow is one thread of the list: its summary, and the state the
// page shows.
type threadRow struct {
	summaries.Summary
	State string `json:"state"`
}

// stateOf is what the list shows of a thread: interrupted (a request
// waits for an answer), busy (a run is active or messages wait), error
// (the last run failed or was abandoned), deleted or idle.
func stateOf(s *summaries.Summary) string {
	switch {
	case s.DeletedSeq != 0:
		return "deleted"
	case len(s.OpenRequests) > 0:
		return "interrupted"
	case s.ActiveRun != "" || s.Pending > 0:
		return "busy"
	case s.LastRunStatus == string(projections.RunFailed), s.LastRunStatus == string(projections.RunAbandoned):
		return "error"
	}
	return "idle"
}

func (c *Console) threads(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	offset, err := intParam(q.Get("offset"), 0, 1<<31)
	if err != nil {
		return errorf(http.StatusUnprocessableEntity, "offset: %v", err)
	}
	limit, err := intParam(q.Get("limit"), 50, maxPage)
	if err != nil {
		return errorf(http.StatusUnprocessableEntity, "limit: %v", err)
	}
	state := q.Get("status")
	switch state {
	case "", "idle", "busy", "interrupted", "error", "deleted":
	default:
		return errorf(http.StatusUnprocessableEntity, "status %q: want idle, busy, interrupted, error or deleted", state)
	}
	metaKey, metaVal, hasMeta := strings.Cut(q.Get("meta"), "=")
	hasMeta = hasMeta || metaKey != ""
	search := q.Get("q")
	var compare func(a, b *summaries.Summary) int
	desc := true
	switch q.Get("sort") {
	case "", "updated":
		compare = func(a, b *summaries.Summary) int { return a.LastActivity.Compare(b.LastActivity) }
	case "created":
		compare = func(a, b *summaries.Summary) int { return a.Created.Compare(b.Created) }
	case "id":
		desc = false
	default:
		return errorf(http.StatusUnprocessableEntity, "sort %q: want updated, created or id", q.Get("sort"))
	}
	ix := c.index()
	if err := ix.Wait(r.Context()); err != nil {
		return errorf(http.StatusServiceUnavailable, "thread list not available: %v", err)
	}
	page := ix.Query(summaries.Query{
		Keep: func(s *summaries.Summary) bool {
			st := stateOf(s)
			if (state == "" && st == "deleted") || (state != "" && st != state) {
				return false
			}
			if search != "" && !strings.Contains(s.Thread, search) {
				return false
			}
			return !hasMeta || metaMatches(s.Metadata[metaKey], metaVal)
		},
		Compare: compare, Desc: desc, Offset: offset, Limit: limit,
	})
	rows := make([]threadRow, 0, len(page.Summaries))
	for i := range page.Summaries {
		rows = append(rows, threadRow{Summary: page.Summaries[i], State: stateOf(&page.Summaries[i])})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": page.Total, "seq": page.Seq, "offset": offset, "threads": rows})
	return nil
}

// metaMatches reports whether a metadata value equals want, compared as
// JSON when want is JSON, else as a string.
func metaMatches(v json.RawMessage, want string) bool {
	if v == nil {
		return false
	}
	var s string
	if json.Unmarshal(v, &s) == nil && s == want {
		return true
	}
	var a, b any
	return json.Unmarshal(v, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}

func intParam(s string, def, hi int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > hi {
		return 0, fmt.Errorf("%q: want a whole number from 0 to %d", s, hi)
	}
	return n, nil
}

// threadsLive tells the page when the list changed, so it fetches its
// page again; at most four times a second, whatever the write rate.
func (c *Console) threadsLive(w http.ResponseWriter, r *http.Request) error {
	ix := c.index()
	sse, err := startSSE(w)
	if err != nil {
		return err
	}
	changed, stop := ix.Subscribe()
	defer stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	dirty := false
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-changed:
			dirty = true
		case <-tick.C:
			if dirty {
				dirty = false
				if sse.event("", "changed", map[string]uint64{"seq": ix.Seq()}) != nil {
					return nil
				}
			}
		case <-keepAlive.C:
			if sse.comment("keep-alive") != nil {
				return nil
			}
		}
	}
}

// timelineEvent is one event of a thread's timeline: the stored event and
// what the fold makes of it.
type timelineEvent struct {
	events.EnvelopeJSON
	// Takeover is set on a thread_claimed whose previous claim was never
	// released: the claim it took the thread from.
	Takeover *claimRef `json:"takeover,omitempty"`
	// Abandons is the run a takeover found active, which it must abandon.
	Abandons string `json:"abandons,omitempty"`
	// Consumes is the message a consuming event took, and how.
	Consumes *consumption `json:"consumes,omitempty"`
	// Run is the run a run event belongs to.
	Run string `json:"run,omitempty"`
	// Anomalies are what the fold found wrong with the event.
	Anomalies []string `json:"anomalies,omitempty"`
}

type claimRef struct {
	Seq    uint64 `json:"seq"`
	Holder string `json:"holder"`
}

type consumption struct {
	Seq  uint64 `json:"seq"`
	Kind string `json:"kind"`
}

// threadEvents streams a thread's events as a timeline, from ?from= (or
// after Last-Event-ID) on, live. Each SSE event's id is the stream
// sequence, so a reconnect resumes with no gap and no duplicate.
func (c *Console) threadEvents(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("thread_id")
	if err := events.ValidateThreadID(id); err != nil {
		return errorf(http.StatusUnprocessableEntity, "%v", err)
	}
	from, err := fromParam(r)
	if err != nil {
		return err
	}
	sse, err := startSSE(w)
	if err != nil {
		return err
	}
	var refused <-chan struct{}
	if c.cfg.Recent != nil {
		ch, stop := c.cfg.Recent.Subscribe()
		defer stop()
		refused = ch
	}
	// seen is the Recent.Seq this connection has read up to: sequence
	// numbers, not ring positions, so a wrap between two reads shows as
	// lost rather than as skipped in silence.
	var seen uint64
	sendRefused := func() error {
		if c.cfg.Recent == nil {
			return nil
		}
		s := c.cfg.Recent.Since(id, seen)
		if s.Lost != 0 {
			if err := sse.event("", "refused_lost", map[string]any{"thread": id, "after": seen, "through": s.Lost,
				"detail": "refused writes of this thread were dropped from this server's ring of recent refusals before this page read them"}); err != nil {
				return err
			}
		}
		for _, e := range s.Refusals {
			if e.Type == TypeTakeover {
				continue // the timeline shows takeovers from the log
			}
			if err := sse.event("", "refused", e); err != nil {
				return err
			}
		}
		seen = s.Next
		return nil
	}
	if err := sendRefused(); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	type item struct {
		env events.Envelope
		err error
	}
	items := make(chan item, 64)
	go func() {
		defer close(items)
		// The fold needs every event, so the follow starts at the first
		// and the page gets those from from on.
		for env, err := range c.cfg.Client.Watch(ctx, id, 1) {
			select {
			case items <- item{env, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	fold := projections.New(id)
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-keepAlive.C:
			if sse.comment("keep-alive") != nil {
				return nil
			}
		case <-refused:
			if sendRefused() != nil {
				return nil
			}
		case it, ok := <-items:
			if !ok {
				return nil
			}
			if it.err != nil {
				_ = sse.event("", "error", map[string]string{"detail": it.err.Error()})
				return nil
			}
			te := annotate(fold, it.env)
			if it.env.Seq < from {
				continue
			}
			if sse.event(strconv.FormatUint(it.env.Seq, 10), "event", te) != nil {
				return nil
			}
		}
	}
}

// annotate applies env to fold and says what it did.
func annotate(fold *projections.Thread, env events.Envelope) timelineEvent {
	te := timelineEvent{EnvelopeJSON: events.ToJSON(env)}
	prev, active, nAnom := fold.Claim, fold.ActiveRun, len(fold.Anomalies)
	if env.Type == events.TypeThreadClaimed && prev.Seq != 0 && !prev.Released {
		te.Takeover = &claimRef{Seq: prev.Seq, Holder: prev.Holder}
		if active != nil {
			te.Abandons = active.ID
		}
	}
	fold.Apply(env)
	for _, a := range fold.Anomalies[nAnom:] {
		te.Anomalies = append(te.Anomalies, a.Reason)
	}
	if ev := env.Event; ev != nil {
		switch b := ev.GetBody().(type) {
		case interface{ GetRunId() string }:
			te.Run = b.GetRunId()
		}
		switch env.Type {
		case events.TypeRunStarted, events.TypeAnswerGiven, events.TypeSteeringGiven:
			// The consumed message is most often among the newest.
			for i := len(fold.Messages) - 1; i >= 0; i-- {
				if m := &fold.Messages[i]; m.Consumed != nil && m.Consumed.Seq == env.Seq {
					te.Consumes = &consumption{Seq: m.Seq, Kind: string(m.Consumed.Kind)}
					break
				}
			}
		}
	}
	return te
}

func fromParam(r *http.Request) (uint64, error) {
	from := uint64(1)
	if s := r.URL.Query().Get("from"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return 0, errorf(http.StatusUnprocessableEntity, "from %q: want a stream sequence from 1", s)
		}
		from = n
	}
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, errorf(http.StatusUnprocessableEntity, "Last-Event-ID %q: want a stream sequence", s)
		}
		from = max(from, n+1)
	}
	return from, nil
}

func (c *Console) fold(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("thread_id")
	if err := events.ValidateThreadID(id); err != nil {
		return errorf(http.StatusUnprocessableEntity, "%v", err)
	}
	t, err := c.cfg.Client.Thread(r.Context(), id)
	if err != nil {
		return threadError(id, err)
	}
	if s := r.URL.Query().Get("at"); s != "" {
		at, err := strconv.ParseUint(s, 10, 64)
		if err != nil || at == 0 {
			return errorf(http.StatusUnprocessableEntity, "at %q: want a stream sequence from 1", s)
		}
		if at > t.LastSeq {
			return errorf(http.StatusNotFound, "thread %s has no event at or after seq %d: its last is at %d", id, at, t.LastSeq)
		}
		if t, err = c.cfg.Client.Thread(r.Context(), id, client.AtSeq(at)); err != nil {
			return threadError(id, err)
		}
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func threadError(id string, err error) error {
	if errors.Is(err, client.ErrNoEvents) {
		return errorf(http.StatusNotFound, "thread %s has no events", id)
	}
	return err
}

func (c *Console) fork(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("thread_id")
	var body struct {
		At     uint64 `json:"at"`
		Thread string `json:"thread"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.At == 0 {
		return errorf(http.StatusUnprocessableEntity, "at: want the stream sequence of one of %s's events", id)
	}
	if err := events.ValidateThreadID(body.Thread); err != nil {
		return errorf(http.StatusUnprocessableEntity, "thread: %v", err)
	}
	if body.Thread == id {
		return errorf(http.StatusUnprocessableEntity, "thread: a fork starts a new thread, not %s itself", id)
	}
	f, err := c.cfg.Client.Fork(r.Context(), id, body.At, body.Thread)
	switch {
	case errors.Is(err, client.ErrThreadExists):
		return errorf(http.StatusConflict, "thread %s already has events: a fork only starts a thread", body.Thread)
	case errors.Is(err, client.ErrNoSuchEvent):
		return errorf(http.StatusNotFound, "seq %d is not an event of thread %s", body.At, id)
	case err != nil:
		return threadError(id, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"thread": body.Thread, "seq": f.Seq, "duplicate": f.Duplicate})
	return nil
}

func (c *Console) configure(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("thread_id")
	var body struct {
		Strategy string `json:"strategy"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if _, err := events.ParseStrategy(body.Strategy); err != nil || body.Strategy == "" {
		return errorf(http.StatusUnprocessableEntity, "strategy %q: want enqueue, reject, interrupt or rollback", body.Strategy)
	}
	seq, err := c.cfg.Client.Configure(r.Context(), id, body.Strategy)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"seq": seq})
	return nil
}

// runnerRow is one runner session and the threads it holds.
type runnerRow struct {
	Session string    `json:"session"`
	Runner  string    `json:"runner"`
	Expires time.Time `json:"expires"`
	TTLMs   int64     `json:"ttl_ms"`
	Live    bool      `json:"live"`
	Held    int       `json:"held"`
}

func (c *Console) runners(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	ss, err := c.cfg.Store.Sessions(ctx)
	if err != nil {
		return err
	}
	ix := c.index()
	held := map[string]int{}
	if ix.Wait(ctx) == nil {
		for _, s := range ix.Query(summaries.Query{Keep: func(s *summaries.Summary) bool { return s.Holder != "" && !s.Released }}).Summaries {
			runner, _, _ := strings.Cut(s.Holder, "/")
			held[runner]++
		}
	}
	now := time.Now()
	rows := make([]runnerRow, 0, len(ss))
	for _, s := range ss {
		rows = append(rows, runnerRow{
			Session: s.ID, Runner: s.Owner, Expires: s.Expires.UTC(), TTLMs: s.TTL.Milliseconds(),
			Live: s.Expires.After(now), Held: held[s.Owner],
		})
	}
	out := map[string]any{"sessions": rows}
	if c.cfg.Recent != nil {
		out["recent"] = c.cfg.Recent.All()
	}
	if c.cfg.Metrics != nil {
		out["metrics"] = c.cfg.Metrics()
	}
	if lag, err := summaries.ReadLag(ctx, c.cfg.Store, c.cfg.Summaries, summaries.DefaultDurable); err == nil {
		out["projector"] = lag
	} else {
		out["projector_error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// audit replays the stream, or one thread, through the audit (and, with
// spec, the spec's trace validator), and streams its progress, then its
// report.
func (c *Console) audit(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Thread string `json:"thread"`
		Spec   bool   `json:"spec"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Thread != "" {
		if err := events.ValidateThreadID(body.Thread); err != nil {
			return errorf(http.StatusUnprocessableEntity, "thread: %v", err)
		}
	}
	ctx := r.Context()
	store := c.cfg.Store
	subj := store.Subjects()
	// Each partition's stream in turn (a thread's alone for one thread),
	// each up to its last sequence now. Progress counts across them: with
	// one partition, the stream's sequences.
	var parts []int
	if body.Thread != "" {
		parts = []int{subj.PartitionOf(body.Thread)}
	} else {
		for p := range subj.PartitionCount() {
			parts = append(parts, p)
		}
	}
	lasts := make([]uint64, len(parts))
	var last uint64 // the total
	for i, p := range parts {
		l, err := store.LastPartitionSeq(ctx, p)
		if err != nil {
			return err
		}
		lasts[i], last = l, last+l
	}
	sse, err := startSSE(w)
	if err != nil {
		return err
	}
	au := audit.NewWithOptions(audit.Options{Subjects: store.Subjects()})
	var sv *spec.TraceValidator
	if body.Spec {
		sv = spec.NewTraceValidatorWith(audit.Options{Subjects: store.Subjects()})
	}
	var n, before uint64 // before: the events of the partitions done
	lastSent := time.Now()
	for i, p := range parts {
		filter := subj.PartitionAll(p)
		if body.Thread != "" {
			filter = subj.ThreadAll(body.Thread)
		}
		_, err = store.Replay(ctx, filter, 1, func(env events.Envelope) error {
			if env.Seq > lasts[i] {
				return errStop
			}
			au.Add(env)
			if sv != nil {
				sv.Add(env)
			}
			n++
			if n%256 == 0 && time.Since(lastSent) > 100*time.Millisecond {
				lastSent = time.Now()
				return sse.event("", "progress", map[string]uint64{"events": n, "seq": before + env.Seq, "last_seq": last})
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			_ = sse.event("", "error", map[string]string{"detail": err.Error()})
			return nil
		}
		before += lasts[i]
	}
	report := map[string]any{"audit": au.Report(), "ok": au.Report().OK()}
	if sv != nil {
		sr := sv.Report()
		report["spec"] = sr
		report["ok"] = au.Report().OK() && sr.OK()
	}
	_ = sse.event("", "progress", map[string]uint64{"events": n, "seq": last, "last_seq": last})
	_ = sse.event("", "report", report)
	return nil
}

var errStop = errors.New("console: replay done")

// decode reads r's JSON body into v; unknown fields are errors, and an
// empty body is {}.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		return errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(data) > 1<<20 {
		return errorf(http.StatusRequestEntityTooLarge, "request body over the 1048576-byte limit")
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusUnprocessableEntity, "request body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusUnprocessableEntity, "request body: data after the JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"detail":"response does not encode"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// sse writes Server-Sent Events.
type sse struct {
	w http.ResponseWriter
	f *http.ResponseController
}

func startSSE(w http.ResponseWriter) (*sse, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, f: http.NewResponseController(w)}
	return s, s.f.Flush()
}

func (s *sse) event(id, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + name + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return err
	}
	return s.f.Flush()
}

func (s *sse) comment(text string) error {
	if _, err := io.WriteString(s.w, ": "+text+"\n\n"); err != nil {
		return err
	}
	return s.f.Flush()
}
