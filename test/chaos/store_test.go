package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// counters counts by name; safe for concurrent use.
type counters struct {
	mu sync.Mutex // protects n
	n  map[string]int64
}

func (c *counters) add(name string, d int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[name] += d
}

func (c *counters) get(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// sum adds every counter whose name starts with prefix.
func (c *counters) sum(prefix string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s int64
	for k, v := range c.n {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}

// String lists the counters whose names start with prefix, sorted, without
// the prefix: "a=1 b=2".
func (c *counters) list(prefix string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.n)) {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			parts = append(parts, fmt.Sprintf("%s=%d", name, c.n[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// chaosStore is one runner's store. It counts what became of appends, and
// it can freeze the runner: while a stall in BeforeAppend sleeps, the
// runner's session renewals and its follow of the stream are held back, as
// in a process that stopped (GC, SIGSTOP, a descheduled VM), and when the
// stall ends the stalled append goes out before anything else is let
// through.
//
// Why: the runner keeps renewing its session while an append waits, and a
// thread actor stops (cancelling the append) as soon as the follow shows a
// newer claim. So a stall in BeforeAppend alone never gets a stale write to
// the server; a frozen runner does, and that is the case the fence exists
// for. Its session lapses, and other runners take every thread it held.
type chaosStore struct {
	events.Store
	stats *counters
	// releases records the releases refused (checkReleases); nil: none.
	releases *releaseLog

	mu     sync.Mutex        // protects the fields below
	gate   chan struct{}     // closed when the freeze ends; nil when none
	resume map[string]func() // thread -> ends the freeze after its append
}

func newChaosStore(s events.Store, stats *counters) *chaosStore {
	return &chaosStore{Store: s, stats: stats, resume: map[string]func(){}}
}

// Append makes the append, ends the thread's pause if this append was the
// stalled one, and counts the outcome: refusals of fenced writes (the fence
// at work), refusals of guarded writes whose run subject moved (the guard,
// or RUNFENCE's compare-and-set, at work), refusals of compare-and-set
// writes (a stale run end after an abandon), and outcomes left unknown
// after natsstore's retries.
func (s *chaosStore) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	ack, err := s.Store.Append(ctx, ev, chk, opts...)
	s.mu.Lock()
	resume := s.resume[ev.GetThread()]
	delete(s.resume, ev.GetThread())
	s.mu.Unlock()
	if resume != nil {
		resume()
	}
	typ := events.TypeOf(ev)
	if typ == events.TypeThreadReleased && errors.Is(err, events.ErrConflict) && s.releases != nil {
		s.releases.add(refusedRelease{thread: ev.GetThread(), claim: ev.GetClaimSeq(), holder: ev.GetHolder(), expect: chk.Seq})
	}
	switch {
	case err == nil && ack.Duplicate:
		s.stats.add("duplicate_ack:"+string(typ), 1)
	case err == nil:
	case errors.Is(err, events.ErrThreadBusy):
		s.stats.add("refused_fenced:"+string(typ), 1)
	case errors.Is(err, events.ErrRunMoved):
		// The guard, or under RUNFENCE the run subject's compare-and-set:
		// a write the holder had not read landed first (issue 23's window).
		s.stats.add("refused_run_moved:"+string(typ), 1)
	case errors.Is(err, events.ErrConflict):
		s.stats.add("refused_cas:"+string(typ), 1)
	case ctx.Err() != nil:
		s.stats.add("cancelled:"+string(typ), 1)
	case errors.Is(err, events.ErrUnavailable):
		s.stats.add("unknown_outcome:"+string(typ), 1)
	default:
		s.stats.add("error:"+string(typ), 1)
	}
	return ack, err
}

// RenewSession waits while the runner is frozen.
func (s *chaosStore) RenewSession(ctx context.Context, ss events.Session) (events.Session, error) {
	if err := s.waitFreeze(ctx); err != nil {
		return events.Session{}, err
	}
	return s.Store.RenewSession(ctx, ss)
}

// The partition leases (P > 1) go to the store's; renewals wait while the
// runner is frozen, so a frozen owner's partitions lapse and move while it
// still believes it owns them, the case the fence covers.

func (s *chaosStore) leaser() (events.PartitionLeaser, error) {
	if l, ok := s.Store.(events.PartitionLeaser); ok {
		return l, nil
	}
	return nil, errors.New("chaos: the store keeps no partition leases")
}

func (s *chaosStore) AcquirePartition(ctx context.Context, p int, session, owner string, ttl time.Duration) (events.PartitionLease, error) {
	l, err := s.leaser()
	if err != nil {
		return events.PartitionLease{}, err
	}
	return l.AcquirePartition(ctx, p, session, owner, ttl)
}

func (s *chaosStore) RenewPartition(ctx context.Context, pl events.PartitionLease) (events.PartitionLease, error) {
	if err := s.waitFreeze(ctx); err != nil {
		return events.PartitionLease{}, err
	}
	l, err := s.leaser()
	if err != nil {
		return events.PartitionLease{}, err
	}
	return l.RenewPartition(ctx, pl)
}

func (s *chaosStore) ReleasePartition(ctx context.Context, pl events.PartitionLease) error {
	l, err := s.leaser()
	if err != nil {
		return err
	}
	return l.ReleasePartition(ctx, pl)
}

func (s *chaosStore) PartitionLeases(ctx context.Context, parts int) ([]events.PartitionLease, error) {
	l, err := s.leaser()
	if err != nil {
		return nil, err
	}
	return l.PartitionLeases(ctx, parts)
}

// Tail holds back the runner's follow of the stream while it is frozen.
func (s *chaosStore) Tail(ctx context.Context, filter string, from uint64) (events.Tail, error) {
	t, err := s.Store.Tail(ctx, filter, from)
	if err != nil {
		return nil, err
	}
	return &freezableTail{Tail: t, s: s}, nil
}

type freezableTail struct {
	events.Tail
	s    *chaosStore
	held *events.Envelope // an event a Next read but did not return: its ctx ended in a freeze
}

func (t *freezableTail) Next(ctx context.Context) (events.Envelope, error) {
	var env events.Envelope
	var err error
	if t.held != nil {
		env, t.held = *t.held, nil
	} else {
		env, err = t.Tail.Next(ctx)
	}
	if werr := t.s.waitFreeze(ctx); werr != nil && err == nil {
		t.held = &env // events.Tail: a Next its ctx ended leaves the tail as it was
		return events.Envelope{}, werr
	}
	return env, err
}

// forRunner returns the store a runner gets: s, with the inner store's
// events.PartitionReader when it has one.
func (s *chaosStore) forRunner() events.Store {
	if pr, ok := s.Store.(events.PartitionReader); ok {
		return partitionChaos{s, pr}
	}
	return s
}

// partitionChaos is a chaosStore whose inner store reads by partition.
type partitionChaos struct {
	*chaosStore
	pr events.PartitionReader
}

// LastPartitionSeq implements events.PartitionReader.
func (s partitionChaos) LastPartitionSeq(ctx context.Context, p int) (uint64, error) {
	return s.pr.LastPartitionSeq(ctx, p)
}

// PartitionThreads implements events.PartitionReader.
func (s partitionChaos) PartitionThreads(ctx context.Context, p int) ([]string, error) {
	return s.pr.PartitionThreads(ctx, p)
}

func (s *chaosStore) waitFreeze(ctx context.Context) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// frozen reports whether the runner is frozen now.
func (s *chaosStore) frozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gate != nil
}

// pauseUntilAppend freezes the runner until thread's next append returns.
// A freeze already on makes this a no-op.
func (s *chaosStore) pauseUntilAppend(thread string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		return false
	}
	gate := make(chan struct{})
	s.gate = gate
	s.resume[thread] = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gate == gate {
			s.gate = nil
		}
		close(gate)
	}
	return true
}

// logCounter is the runners' and stores' slog handler: it counts warnings
// and errors by message and keeps the first few of each for the report,
// without flooding the test log. It also keeps the latest records, from
// info up, for a failure's message.
type logCounter struct {
	mu      sync.Mutex // protects the fields below
	n       map[string]int
	samples []string
	recent  []string // a ring of the latest records
	next    int      // where the next record goes in recent
}

// logRing is how many records logCounter.recent keeps.
const logRing = 400

func (l *logCounter) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }

func (l *logCounter) Handle(ctx context.Context, r slog.Record) error {
	return l.handle(r, nil)
}

func (l *logCounter) handle(r slog.Record, attrs []slog.Attr) error {
	if r.Level < slog.LevelWarn && slices.ContainsFunc(attrs, func(a slog.Attr) bool { return a.Key == "lib" }) {
		return nil // protoactor's own
	}
	key := r.Level.String() + " " + r.Message
	var b strings.Builder
	b.WriteString(key)
	for _, a := range attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	line := b.String()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent) < logRing {
		l.recent = append(l.recent, "")
	}
	l.recent[l.next] = r.Time.Format("15:04:05.000") + " " + line
	l.next = (l.next + 1) % logRing
	if r.Level < slog.LevelWarn {
		return nil
	}
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[key]++
	if l.n[key] <= 2 && len(l.samples) < 40 {
		l.samples = append(l.samples, line)
	}
	return nil
}

// latest returns the kept records that contain every one of words, oldest
// first, at most n.
func (l *logCounter) latest(n int, words ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i := range len(l.recent) {
		line := l.recent[(l.next+i)%len(l.recent)]
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
			out = append(out, line)
		}
	}
	return out[max(0, len(out)-n):]
}

func (l *logCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{l: l, attrs: as}
}
func (l *logCounter) WithGroup(string) slog.Handler { return l }

// attrHandler is a logCounter with attributes added (the runner's id).
type attrHandler struct {
	l     *logCounter
	attrs []slog.Attr
}

func (h *attrHandler) Enabled(ctx context.Context, lv slog.Level) bool { return h.l.Enabled(ctx, lv) }
func (h *attrHandler) Handle(_ context.Context, r slog.Record) error   { return h.l.handle(r, h.attrs) }
func (h *attrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{l: h.l, attrs: append(slices.Clip(h.attrs), as...)}
}
func (h *attrHandler) WithGroup(string) slog.Handler { return h }

func (l *logCounter) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l.n)) {
		parts = append(parts, fmt.Sprintf("%q=%d", k, l.n[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// refusedRelease is a release the store refused: its compare-and-set
// expected expect on the subject the layout keeps releases on.
type refusedRelease struct {
	thread, holder string
	claim, expect  uint64
}

// releaseLog collects the refused releases of every runner.
type releaseLog struct {
	mu   sync.Mutex // protects refs
	refs []refusedRelease
}

func (l *releaseLog) add(r refusedRelease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refs = append(l.refs, r)
}

func (l *releaseLog) list() []refusedRelease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]refusedRelease(nil), l.refs...)
}
