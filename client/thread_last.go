package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// Window is the newest part of a thread, as [Client.ThreadLast] returns it.
//
// Thread's state is the thread's as a whole: LastSeq, LastActivity, Taken,
// Claim, ActiveRun, the open requests, Fork and Strategy. Its Messages are
// the newest messages only, from From on, and its Runs the runs started at
// or after From. Its Anomalies are those a bounded view keeps (the newest
// few before the snapshot it started from, and every one after it) when
// the window was read from a snapshot, and every one otherwise.
type Window struct {
	*projections.Thread
	// NumMessages is how many messages the thread has, shown or not.
	NumMessages int
	// OmittedMessages is how many older messages Messages leaves out.
	OmittedMessages int
	// PendingSeqs is the sequences of every pending message, oldest first,
	// shown or not: a backlog may be older than the newest messages.
	PendingSeqs []uint64
	// From is the sequence of the oldest message shown when some are
	// omitted; the runs started before it are omitted too. 0 when nothing
	// is omitted: Thread is then the whole fold.
	From uint64
	// Read is how many events were read from the log to build the window,
	// the snapshot's not counted.
	Read int
}

// ThreadLast returns thread as [Client.Thread] does, but for its newest n
// messages only (n > 0), with the runs started since the oldest of them:
// what `artifactr show` prints. Its cost is bounded by n and by how much
// the thread's state spans, not by the thread's length.
//
// It starts from the thread's snapshot (a runner's compact one will do)
// and the events after it, which give the state exactly, and then folds
// whole the events from the oldest shown message on. That fold does not
// know the state before its first event, so it is checked against the
// exact state: the same active run and pending messages, and the same
// anomalies in its span. When they differ (a run or a backlog older than
// the window), the window is read again from further back, a few times,
// and then from the start. Without a usable snapshot, for a thread of at
// most n messages, for a window that reaches into a fork's copied history,
// or with AtTime or Filter, it folds the whole thread as Thread does and
// cuts the result, so the output is the same either way.
func (c *Client) ThreadLast(ctx context.Context, thread string, n int, opts ...ThreadOption) (*Window, error) {
	if n <= 0 {
		return nil, fmt.Errorf("client: ThreadLast of %d messages: want at least 1", n)
	}
	var o threadOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.at.IsZero() && o.keep == nil {
		w, err := c.threadWindow(ctx, thread, n, o.seq)
		if w != nil || err != nil {
			return w, err
		}
	}
	return c.wholeWindow(ctx, thread, n, opts...)
}

// wholeWindow folds the whole thread and keeps its newest n messages.
func (c *Client) wholeWindow(ctx context.Context, thread string, n int, opts ...ThreadOption) (*Window, error) {
	cs := &countingLoader{Loader: c.store}
	t, err := c.thread(ctx, cs, thread, opts...)
	if err != nil {
		return nil, err
	}
	w := &Window{Thread: t, NumMessages: len(t.Messages), PendingSeqs: pendingSeqs(t), Read: cs.n}
	if len(t.Messages) > n {
		from := t.Messages[len(t.Messages)-n].Seq
		cut(t, from)
		w.From, w.OmittedMessages = from, w.NumMessages-n
	}
	return w, nil
}

// cut drops t's messages before from and its runs started before it.
func cut(t *projections.Thread, from uint64) {
	i, _ := slices.BinarySearchFunc(t.Messages, from, func(m projections.Message, s uint64) int {
		return cmpU(m.Seq, s)
	})
	t.Messages = slices.Clone(t.Messages[i:])
	t.Runs = slices.DeleteFunc(slices.Clone(t.Runs), func(r *projections.Run) bool { return r.StartSeq < from })
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// windowTries is how many times threadWindow reads the window from further
// back before it gives up and the whole thread is folded.
const windowTries = 4

// threadWindow is ThreadLast from the snapshot; nil, nil when it cannot be
// (the caller folds the whole thread).
func (c *Client) threadWindow(ctx context.Context, thread string, n int, upTo uint64) (*Window, error) {
	state := c.snapshot(ctx, thread, upTo, false)
	if state == nil || state.Fork != nil && state.Fork.Unresolved {
		return nil, nil
	}
	snapAnomalies := len(state.Anomalies)
	oldestSnapAnomaly := uint64(0)
	if snapAnomalies > 0 {
		oldestSnapAnomaly = state.Anomalies[0].Seq
	}
	snapSeq := state.LastSeq
	tail, err := c.store.Load(ctx, thread, snapSeq+1)
	if err != nil {
		return nil, fmt.Errorf("client: load %s: %w", thread, err)
	}
	read := len(tail)
	if err := c.lookupFirsts(ctx, tail); err != nil {
		return nil, err
	}
	for _, env := range tail {
		if upTo == 0 || env.Seq <= upTo {
			state.Apply(env)
		}
	}
	total := state.NumMessages()
	if total <= n {
		return nil, nil // the whole thread is shown: fold it whole
	}
	seqs := newestSeqs(state)
	if len(seqs) < n {
		// The window reaches past what the snapshot remembers, or into
		// a fork's copied history.
		return nil, nil
	}
	from := seqs[len(seqs)-n]
	start := from
	for try := range windowTries {
		start = windowStart(seqs, n, try, start, state.LastSeq)
		// A snapshot that keeps as many anomalies as a compact one does,
		// all in the window, may have forgotten some: they cannot be
		// checked.
		if snapAnomalies >= compactAnomalies && oldestSnapAnomaly >= start {
			return nil, nil
		}
		envs, err := c.store.Load(ctx, thread, start)
		if err != nil {
			return nil, fmt.Errorf("client: load %s: %w", thread, err)
		}
		read += len(envs)
		// A window read from the thread's first event starts with its
		// fork, if it is one: its history is read from the source.
		if err := projections.ResolveFirst(ctx, c.store, envs); err != nil {
			return nil, fmt.Errorf("client: load %s: %w", thread, err)
		}
		if err := c.lookupFirsts(ctx, envs); err != nil {
			return nil, err
		}
		win := projections.New(thread)
		win.Strategy = state.Strategy
		win.Claim = claimBefore(state, envs, start)
		for _, env := range envs {
			if upTo == 0 || env.Seq <= upTo {
				win.Apply(env)
			}
		}
		if agrees(win, state, start) {
			return merge(state, win, from, total, n, read), nil
		}
		if start <= 1 {
			return nil, nil
		}
	}
	return nil, nil
}

// windowStart is where try reads the window from, prev where the try
// before it did: the newest n messages' oldest first, then further back,
// from the newest n*2^try messages' oldest while the snapshot remembers
// them, then from an event twice as far from the end as prev.
func windowStart(seqs []uint64, n, try int, prev, last uint64) uint64 {
	if k := n << try; k <= len(seqs) {
		return seqs[len(seqs)-k]
	}
	if back := 2 * (last + 1 - prev); back < last {
		return last + 1 - back
	}
	return 1
}

// claimBefore returns the claim as it was before start, for the fold of
// the window from start, as far as it can be known without reading
// further back: state's claim when nothing changed it since start, else
// the claim that the window's first claim event releases, if it is a
// release. A wrong guess shows as anomalies the whole fold did not find,
// and the window is read from further back.
func claimBefore(state *projections.Thread, envs []events.Envelope, start uint64) projections.Claim {
	if state.LastClaimSubjectSeq < start {
		return state.Claim
	}
	for _, env := range envs {
		if env.Err != nil || env.Event == nil || events.TypeOf(env.Event).Kind() != events.KindClaim {
			continue
		}
		if events.TypeOf(env.Event) == events.TypeThreadReleased {
			return projections.Claim{Holder: env.Event.GetHolder(), Seq: env.Event.GetClaimSeq()}
		}
		break
	}
	return projections.Claim{}
}

// compactAnomalies is how many anomalies a runner's compact snapshot keeps
// (projections' compactAnomalies).
const compactAnomalies = 16

// newestSeqs returns the sequences of the messages posted in the thread
// (not copied by a fork) that state knows, oldest first: those the
// snapshot remembered (Recent) and those it holds.
//
// A compact snapshot's Recent are its newest messages; the messages it
// holds are the pending ones, which may be older, and those posted after
// it. Only the latter follow Recent without a gap.
func newestSeqs(state *projections.Thread) []uint64 {
	seqs := slices.Clone(state.Recent)
	for _, m := range state.Messages {
		if m.Consumed != nil && m.Consumed.Kind == projections.ConsumedForked {
			continue
		}
		if len(state.Recent) == 0 || m.Seq > state.Recent[len(state.Recent)-1] {
			seqs = append(seqs, m.Seq)
		}
	}
	return seqs
}

// agrees reports whether win, folded from start without the state before
// it, made the decisions the whole fold made, as far as state (exact)
// shows them: the same active run, the same pending messages from start
// on, and the same anomalies from start on.
func agrees(win, state *projections.Thread, start uint64) bool {
	if (win.ActiveRun == nil) != (state.ActiveRun == nil) ||
		win.ActiveRun != nil && win.ActiveRun.ID != state.ActiveRun.ID {
		return false
	}
	var want, got []uint64
	for _, m := range state.Pending() {
		if m.Seq >= start {
			want = append(want, m.Seq)
		}
	}
	for _, m := range win.Pending() {
		got = append(got, m.Seq)
	}
	if !slices.Equal(want, got) {
		return false
	}
	var wantA []projections.Anomaly
	for _, an := range state.Anomalies {
		if an.Seq >= start {
			wantA = append(wantA, an)
		}
	}
	return slices.Equal(wantA, win.Anomalies)
}

// merge returns the window: state's state, with win's messages from from
// on and its runs started from then. win agrees with state (see agrees),
// so its active run is state's, whole: with its outputs and steering,
// which a compact snapshot forgot.
func merge(state, win *projections.Thread, from uint64, total, n, read int) *Window {
	t := state.Clone()
	w := win.Clone()
	active := w.ActiveRun
	cut(w, from)
	t.Messages, t.Runs = w.Messages, w.Runs
	if t.Requests == nil {
		t.Requests = make(map[string]*projections.Request)
	}
	for id, q := range w.Requests {
		if _, ok := t.Requests[id]; !ok {
			t.Requests[id] = q
		}
	}
	if active != nil {
		t.ActiveRun = active
	}
	return &Window{Thread: t, NumMessages: total, OmittedMessages: total - n, From: from, PendingSeqs: pendingSeqs(state), Read: read}
}

// pendingSeqs returns the sequences of t's pending messages.
func pendingSeqs(t *projections.Thread) []uint64 {
	var seqs []uint64
	for _, m := range t.Pending() {
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

// countingLoader counts the envelopes it loads.
type countingLoader struct {
	events.Loader
	n int
}

func (l *countingLoader) Load(ctx context.Context, thread string, from uint64) ([]events.Envelope, error) {
	envs, err := l.Loader.Load(ctx, thread, from)
	l.n += len(envs)
	return envs, err
}

// lookupFirsts resolves the posts of envs, a part of the thread read after
// a compact snapshot or from inside the thread, against the first-post
// index, reading only: a repost of an id posted before them is then no
// message, as it is in the whole fold.
func (c *Client) lookupFirsts(ctx context.Context, envs []events.Envelope) error {
	idx, ok := c.store.(events.FirstPostLookup)
	if !ok {
		return nil
	}
	if err := events.LookupFirstPosts(ctx, idx, envs); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}
