package httpapi

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/summaries"
)

// hub is one follow of the whole stream, live from the server's start,
// that hands each event to the waits and streams following its thread: a
// run's wait costs a subscription, not a consumer of its own. A
// subscriber that falls behind is dropped (its channel closed, lost set)
// and follows its thread by itself from where it got.
//
// The hub also keeps the folds of the threads it saw begin (their first
// event came after the hub's start), so that a run on such a thread reads
// nothing from NATS: its fold is the hub's, cloned. A thread with events
// from before the start is read from the log as usual.
//
// With partitions each partition's stream has its own sequences, so the
// hub's start and position are one per partition, and a sequence is
// compared with its thread's partition's.
type hub struct {
	subj  events.Subjects
	start []uint64 // the first sequence the hub follows, per partition

	mu    sync.Mutex // protects the fields below
	cond  *sync.Cond // signalled when pos moves or the hub stops
	pos   []uint64   // the last sequence applied, per partition
	subs  map[string]map[*sub]struct{}
	folds map[string]*fold
	down  bool // the follow ended: subscribe returns nil
	clock uint64
}

// fold is a thread's fold kept by the hub. Complete is false until a read
// of the log showed the thread has no event before the hub's start.
type fold struct {
	t        *projections.Thread
	complete bool
	used     uint64 // the hub's clock at its last use, for eviction
}

// maxFolds bounds the folds the hub keeps; the least recently used go.
const maxFolds = 4096

// sub is one subscription to a thread's events.
type sub struct {
	thread string
	ch     chan *events.Envelope // shared, never changed: 8 bytes a slot, not a copy
	lost   bool                  // set before ch is closed when it fell behind
}

// subBuffer is how far a subscriber may fall behind before it is dropped.
const subBuffer = 512

// newHub returns a hub of subj's partitions that follows from start, one
// sequence per partition.
func newHub(subj events.Subjects, start []uint64) *hub {
	h := &hub{subj: subj, subs: map[string]map[*sub]struct{}{}, folds: map[string]*fold{}}
	h.cond = sync.NewCond(&h.mu)
	h.start, h.pos = starts(start)
	return h
}

// starts returns a copy of start and the positions before it.
func starts(start []uint64) (from, pos []uint64) {
	from, pos = slices.Clone(start), make([]uint64, len(start))
	for p := range start {
		pos[p] = start[p] - 1
	}
	return from, pos
}

// restart makes a hub that is down follow again from start.
func (h *hub) restart(start []uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start, h.pos = starts(start)
	h.down = false
}

// from returns where the hub follows from, per partition.
func (h *hub) from() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.start)
}

// run follows the stream until ctx ends or the follow fails; then every
// subscription is closed and later ones follow on their own.
func (h *hub) run(ctx context.Context, watch func(ctx context.Context) func(func(events.Envelope, error) bool)) {
	defer func() {
		h.mu.Lock()
		h.down = true
		for _, m := range h.subs {
			for s := range m {
				s.lost = true
				close(s.ch)
			}
		}
		h.subs = map[string]map[*sub]struct{}{}
		h.folds = map[string]*fold{}
		h.cond.Broadcast()
		h.mu.Unlock()
	}()
	for env, err := range watch(ctx) {
		if err != nil {
			return
		}
		h.mu.Lock()
		h.apply(env)
		for s := range h.subs[env.Thread] {
			select {
			case s.ch <- &env:
			default:
				s.lost = true
				close(s.ch)
				delete(h.subs[env.Thread], s)
			}
		}
		if p, ok := h.subj.FilterPartition(env.Subject); ok {
			h.pos[p] = env.Seq
		}
		h.cond.Broadcast()
		h.mu.Unlock()
	}
}

// apply folds env into its thread's fold, starting one for a thread the
// hub has not seen. Called with mu held.
func (h *hub) apply(env events.Envelope) {
	if events.ValidateThreadID(env.Thread) != nil {
		return
	}
	f := h.folds[env.Thread]
	if f == nil {
		if len(h.folds) >= maxFolds {
			h.evict()
		}
		// A thread_metadata that created the thread (POST /threads checks
		// the thread had no event) or a thread_forked (the fold rules
		// admit it only as the first event) begins the thread: its fold is
		// complete from the start.
		complete := env.Event.GetThreadMetadata().GetCreated() || env.Event.GetThreadForked() != nil
		f = &fold{t: projections.New(env.Thread), used: h.clock, complete: complete}
		h.folds[env.Thread] = f
	}
	f.t.Apply(env)
}

// evict drops the least recently used quarter of the folds.
func (h *hub) evict() {
	var oldest []uint64
	for _, f := range h.folds {
		oldest = append(oldest, f.used)
	}
	if len(oldest) == 0 {
		return
	}
	// The quarter-th smallest clock value, found by partial sort.
	cut := nth(oldest, len(oldest)/4)
	for th, f := range h.folds {
		if f.used <= cut {
			delete(h.folds, th)
		}
	}
}

func nth(xs []uint64, k int) uint64 {
	// Quickselect is not worth it here: eviction is rare.
	for i := 0; i <= k && i < len(xs); i++ {
		m := i
		for j := i + 1; j < len(xs); j++ {
			if xs[j] < xs[m] {
				m = j
			}
		}
		xs[i], xs[m] = xs[m], xs[i]
	}
	return xs[min(k, len(xs)-1)]
}

// waitPos waits until the hub has applied every event up to seq[p] in
// each partition p; false when the hub is down or ctx ends first.
func (h *hub) waitPos(ctx context.Context, seq []uint64) bool {
	stop := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for !h.reached(seq) && !h.down && ctx.Err() == nil {
		h.cond.Wait()
	}
	return h.reached(seq) && !h.down
}

// reached reports whether pos has reached seq in every partition. Called
// with mu held.
func (h *hub) reached(seq []uint64) bool {
	for p := range seq {
		if p < len(h.pos) && h.pos[p] < seq[p] {
			return false
		}
	}
	return true
}

// caughtUpWait bounds how long an answer waits for the hub to reach what
// it read or wrote; past it the answer goes out anyway.
const caughtUpWait = 5 * time.Second

// caughtUp waits until the hub has applied seq of thread's partition, so
// that a request made after this answer finds the hub's folds at least as
// new as the answer: what the API answered, later runs and waits see
// (monotonic reads and read-your-writes through the API).
func (s *Server) caughtUp(ctx context.Context, thread string, seq uint64) {
	want := make([]uint64, len(s.hub.start))
	want[s.hub.subj.PartitionOf(thread)] = seq
	s.caughtUpAll(ctx, want)
}

// caughtUpAll is caughtUp of every partition: seq[p] in partition p.
func (s *Server) caughtUpAll(ctx context.Context, seq []uint64) {
	ctx, cancel := context.WithTimeout(ctx, caughtUpWait)
	defer cancel()
	s.hub.waitPos(ctx, seq)
}

// newer returns the summaries of the hub's folds to use in place of have
// (thread -> last sequence of its summary): a thread missing from have
// began after have was read, so its fold is complete; one in have is
// replaced when the fold is known complete and not older. Search uses it
// so that a thread the API just wrote is found even when the read model
// lags or misses it.
func (h *hub) newer(have map[string]uint64) []summaries.Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []summaries.Summary
	for th, f := range h.folds {
		last, ok := have[th]
		if (!ok && f.t.LastSeq > last) || (f.complete && f.t.LastSeq >= last) {
			out = append(out, summaries.FromThread(f.t))
		}
	}
	return out
}

// subscribe returns a subscription to thread's events applied from now on
// (nil when the hub is down) and, when the hub has the thread's complete
// fold, a copy of it: the subscription carries on exactly from there.
func (h *hub) subscribe(thread string) (*sub, *projections.Thread, *fold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return nil, nil, nil
	}
	s := &sub{thread: thread, ch: make(chan *events.Envelope, subBuffer)}
	m := h.subs[thread]
	if m == nil {
		m = map[*sub]struct{}{}
		h.subs[thread] = m
	}
	m[s] = struct{}{}
	f := h.folds[thread]
	if f == nil {
		return s, nil, nil
	}
	h.clock++
	f.used = h.clock
	if f.complete {
		return s, f.t.Clone(), f
	}
	return s, nil, f
}

// verify marks f complete when loaded, a read of its thread's log, shows
// the thread had no event before the hub's start; a thread that had one is
// never kept.
func (h *hub) verify(thread string, f *fold, loaded []events.Envelope) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.folds[thread] != f {
		return
	}
	if len(loaded) > 0 && loaded[0].Seq < h.start[h.subj.PartitionOf(thread)] {
		delete(h.folds, thread)
		return
	}
	f.complete = true
}

func (h *hub) unsubscribe(s *sub) {
	if s == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.subs[s.thread]; m != nil {
		if _, ok := m[s]; ok {
			delete(m, s)
			close(s.ch)
			if len(m) == 0 {
				delete(h.subs, s.thread)
			}
		}
	}
}
