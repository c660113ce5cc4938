package partitions

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/artifactr/artifactr/actors/runner/owner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// TTL is the runners' session and partition lease TTL.
const TTL = eventstest.TTL

// Bound is how long after the faults stop (or after its post, if later) a
// message may wait to be consumed: a thawed runner's session lapses and
// it rejoins, the others drain and release (at once), the newcomer reads
// the leases (every TTL/3) and takes them, then claims.
const Bound = 3 * TTL

// Checks the simulation adds to the audit's (audit.CheckNames).
const (
	// CheckExactlyOnce: once the faults stop, every acknowledged post is
	// consumed, by exactly one run_started, within Bound.
	CheckExactlyOnce = "ExactlyOnce"
	// CheckOwnership: once the faults stop, every partition is owned by
	// exactly one live runner, the one the assignment gives it to, its
	// lease names that runner's session, and no runner owns more than
	// ⌈P/R⌉.
	CheckOwnership = "OneOwnerBalanced"
	// CheckStore: a store call that must answer failed.
	CheckStore = "StoreAnswers"
	// CheckLayout: every claim marker and release is on the subject the
	// seed's layout says (Config.Layout).
	CheckLayout = "MarkersOnLayout"
)

// Config configures one run.
type Config struct {
	Runners    int // runners at the start
	MaxRunners int // joins stop at this many, alive or frozen
	Partitions int
	Threads    int // the thread id space: posts pick ids from it
	// Hot is a few threads that get half of the posts, so that threads
	// get several messages and runs overlap claims; 0 spreads all posts.
	Hot     int
	Posts   int // posts during the faults
	Changes int // membership changes during the faults, spread over the posts
	// Unfenced wraps every runner's store with eventstest.Unfenced: the
	// control.
	Unfenced bool
	// Fatal says which checks end the run; nil means all. The others are
	// counted in Result.Ignored. CheckStore always ends it.
	Fatal func(check string) bool
	Trace bool
	// Layout is the stream's fence layout: the claim subject's (the zero
	// value), the run subject's (RUNFENCE, issue 23), or the seed's
	// ([eventstest.LayoutBySeed]).
	Layout eventstest.Layout
}

// Small is the default run's scale: a few runs a second.
func Small() Config {
	return Config{Runners: 3, MaxRunners: 5, Partitions: 8, Threads: 1_000_000, Hot: 50, Posts: 1500, Changes: 12}
}

// Large is issue 29's scale: 10 runners, P = 64, posts over a million
// thread ids.
func Large() Config {
	return Config{Runners: 10, MaxRunners: 12, Partitions: 64, Threads: 1_000_000, Hot: 1000, Posts: 100_000, Changes: 40}
}

// Result is what one seed did.
type Result struct {
	Seed    uint64
	Steps   int
	Events  int
	Check   string // the check that broke; "" when all held
	Failure string
	Trace   []string
	Figures Figures
	Ignored map[string]int
	// RunFence: the seed ran on the run subject's layout (Config.Layout).
	RunFence bool
}

// Failed reports whether a check broke.
func (r Result) Failed() bool { return r.Check != "" }

// Figures are what a run measured.
type Figures struct {
	Posts    int // acknowledged
	Threads  int // distinct threads posted to
	Consumed int // run_started events
	Fenced   int // consuming writes refused by the fence
	// Shared counts the consuming writes made while another live runner
	// also believed it owned the thread's partition (a thawed runner
	// before its core stepped, views of the sessions that differ), and
	// SharedRefused those of them the fence refused.
	Shared, SharedRefused int
	// Changes are the membership changes the lease watch saw; Moved, for
	// each, the partitions whose assigned runner changed.
	Changes int
	Moved   []int
	// Grew says, for each change, whether a session came (a join or a
	// rejoin) rather than went (a leave or a lapse).
	Grew []bool
	// Least is, for each change, the least that must move: P over the
	// larger of the runner counts before and after.
	Least []float64
	// Acquired counts partition acquisitions by every runner; Core sums
	// their cores' counters.
	Acquired int64
	Core     owner.Stats
	// MaxLag is the longest wait of a message consumed after the faults
	// stopped, from then or its post.
	MaxLag time.Duration
	// Owned is the partitions each live runner owns at the end; Balance
	// is max/mean, and BalanceBound ⌈P/R⌉/(P/R).
	Owned        []int
	Balance      float64
	BalanceBound float64
	SimTime      time.Duration
	Settle       time.Duration // simulated time from the end of the faults to settled
}

type option struct {
	weight int
	do     func()
}

type world struct {
	cfg   Config
	seed  uint64
	rng   *rand.Rand
	ctx   context.Context
	done  context.Context // already cancelled: polls without blocking
	clock *eventstest.Clock

	log     *memstore.Log
	subj    events.Subjects // every handle's: the layout
	reader  events.Store
	poster  events.Store
	srv     eventstest.Timers
	runners []*runner
	nextID  int

	// The lease watch's view of the live sessions.
	watch      events.LeaseWatch
	live       map[string]bool
	lastAssign []string // the assignment of live, as last computed
	lastR      int      // the number of live sessions then

	// The checker's copy of the log.
	tail      events.Tail
	auditor   *audit.Auditor
	nViol     int
	events    int
	folds     map[string]*projections.Thread
	byPart    [][]string          // threads posted to, per partition, in order
	unsettled map[string]struct{} // threads with a pending message or an active run
	postedAt  map[uint64]time.Time

	posted   int
	noFaults bool
	calm     time.Time
	step     int
	opts     []option
	trace    []string
	res      Result
}

// Run simulates seed; the same seed and Config give the same result.
func Run(seed uint64, cfg Config) Result {
	w := newWorld(seed, cfg)
	defer w.tail.Stop()
	defer w.watch.Stop()
	w.run()
	w.res.Seed, w.res.Events, w.res.Trace = seed, w.events, w.trace
	w.res.RunFence = w.subj.RunFence
	w.res.Figures.SimTime = w.now().Sub(eventstest.Epoch)
	w.res.Figures.Threads = len(w.folds)
	for _, r := range w.runners {
		st, c := r.core.Stats(), &w.res.Figures.Core
		c.Acquired += st.Acquired
		c.Released += st.Released
		c.Lost += st.Lost
		c.Lapsed += st.Lapsed
		c.Drains += st.Drains
		c.Refused += st.Refused
	}
	return w.res
}

func newWorld(seed uint64, cfg Config) *world {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	w := &world{
		cfg: cfg, seed: seed,
		rng:       rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)),
		ctx:       context.Background(),
		done:      done,
		clock:     eventstest.NewClock(0),
		folds:     map[string]*projections.Thread{},
		byPart:    make([][]string, cfg.Partitions),
		unsettled: map[string]struct{}{},
		postedAt:  map[uint64]time.Time{},
		live:      map[string]bool{},
	}
	w.srv.Clock = w.clock
	w.subj.RunFence = cfg.Layout.RunFence(seed)
	w.auditor = audit.NewWithOptions(audit.Options{Subjects: w.subj})
	w.log = memstore.NewLogWith(memstore.LogConfig{Mode: memstore.Mode(seed % 2), Now: w.clock.Now, AfterFunc: w.afterFunc,
		SessionID: func() string { return fmt.Sprintf("%016x", w.rng.Uint64()) }})
	w.reader = w.log.Open(memstore.Config{Now: w.clock.Now, Subjects: w.subj})
	w.poster = w.log.Open(memstore.Config{Now: w.clock.Now, Subjects: w.subj})
	var err error
	if w.tail, err = w.reader.Tail(w.ctx, w.reader.Subjects().All(), 1); err != nil {
		panic(err) // memstore's Tail fails only on a done context
	}
	if w.watch, err = w.reader.WatchLeases(w.ctx); err != nil {
		panic(err)
	}
	w.tracef("seed %d: %+v, log %s, fence on the run subject %v", seed, cfg, w.log.Mode(), w.subj.RunFence)
	for range cfg.Runners {
		w.join()
	}
	return w
}

func (w *world) afterFunc(d time.Duration, f func()) { w.srv.AfterFunc(d, f) }

func (w *world) now() time.Time { return w.clock.Now() }

func (w *world) run() {
	for w.step = 1; w.posted < w.cfg.Posts; w.step++ {
		w.res.Steps = w.step
		w.act()
		if w.check() {
			return
		}
	}
	w.drain()
}

// act draws one enabled action by weight and does it.
func (w *world) act() {
	w.opts = w.opts[:0]
	add := func(weight int, do func()) { w.opts = append(w.opts, option{weight, do}) }
	add(10, w.post)
	for _, r := range w.runners {
		if r.state == alive {
			w.runnerActions(r, add)
		}
	}
	if w.renewDue() == nil {
		add(2, w.advance)
	}
	w.pick()
}

func (w *world) pick() {
	total := 0
	for _, o := range w.opts {
		total += o.weight
	}
	x := w.rng.IntN(total)
	for _, o := range w.opts {
		if x < o.weight {
			o.do()
			return
		}
		x -= o.weight
	}
}

// post posts to a random thread of the id space; every so many posts a
// runner joins, leaves, freezes or thaws.
func (w *world) post() {
	n := w.rng.IntN(w.cfg.Threads)
	if w.cfg.Hot > 0 && w.rng.IntN(2) == 0 {
		n = w.rng.IntN(w.cfg.Hot) // the hot ones are the first ids
	}
	th := fmt.Sprintf("t%07d", n)
	w.posted++
	id := fmt.Sprintf("m%d", w.posted)
	if _, err := w.poster.Post(w.ctx, th, &eventspb.MessagePosted{MessageId: id, Author: "sim", Text: id}); err != nil {
		w.fail(CheckStore, fmt.Sprintf("post to %s: %v", th, err))
		return
	}
	w.res.Figures.Posts++
	if every := max(w.cfg.Posts/(w.cfg.Changes+1), 1); w.cfg.Changes > 0 && w.posted%every == 0 && w.posted < w.cfg.Posts {
		w.change()
	}
}

// change makes one membership change.
func (w *world) change() {
	var up, frozen []*runner
	for _, r := range w.runners {
		switch {
		case r.state == frozen_:
			frozen = append(frozen, r)
		case r.state == alive && !r.leaving:
			up = append(up, r)
		}
	}
	var opts []func()
	n := len(up) + len(frozen)
	if n < w.cfg.MaxRunners {
		opts = append(opts, w.join)
	}
	if n < w.cfg.Runners {
		opts = append(opts, w.join) // drift back towards the starting count
	}
	if len(up) > 1 {
		opts = append(opts, func() { w.freeze(up[w.rng.IntN(len(up))]) })
		if n > (w.cfg.Runners+1)/2 {
			opts = append(opts, func() { w.leave(up[w.rng.IntN(len(up))]) })
		}
	}
	if len(frozen) > 0 {
		opts = append(opts, func() { w.thaw(frozen[w.rng.IntN(len(frozen))]) })
	}
	if len(opts) > 0 {
		opts[w.rng.IntN(len(opts))]()
	}
}

// renewDue returns an alive runner with a renewal due (its session's, or
// its core's timer, which renews its partition leases), or lease calls
// whose reports it has not read: time does not pass them, as a live
// process renews on time and its lease calls take far less than a TTL.
// A stall is a freeze.
func (w *world) renewDue() *runner {
	for _, r := range w.runners {
		if r.state == alive && (!r.renewAt.After(w.now()) || (!r.wake.IsZero() && !r.wake.After(w.now())) || len(r.inbox) > 0) {
			return r
		}
	}
	return nil
}

// advance moves simulated time on, never past an alive runner's renewal.
func (w *world) advance() {
	to := w.now().Add(time.Duration(1+w.rng.IntN(int(TTL/time.Millisecond)/4)) * time.Millisecond)
	for _, r := range w.runners {
		if r.state != alive {
			continue
		}
		if r.renewAt.Before(to) {
			to = r.renewAt
		}
		if !r.wake.IsZero() && r.wake.Before(to) {
			to = r.wake
		}
	}
	w.advanceTo(to)
}

// advanceTo moves the clock to t, firing the server's timers on the way.
func (w *world) advanceTo(t time.Time) { w.srv.AdvanceTo(t) }

// nextDue is the earliest time anything waits for, zero when nothing does.
func (w *world) nextDue() time.Time {
	var at time.Time
	min := func(t time.Time) {
		if !t.IsZero() && t.After(w.now()) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, t := range w.srv.Due() {
		min(t)
	}
	for _, r := range w.runners {
		if r.state != alive {
			continue
		}
		min(r.renewAt)
		min(r.wake)
		for _, rc := range r.rechecks {
			min(rc.at)
		}
	}
	return at
}

func (w *world) fail(check, msg string) bool {
	if check != CheckStore && w.cfg.Fatal != nil && !w.cfg.Fatal(check) {
		if w.res.Ignored == nil {
			w.res.Ignored = map[string]int{}
		}
		w.res.Ignored[check]++
		return false
	}
	if w.res.Check == "" {
		w.res.Check, w.res.Failure = check, msg
		w.tracef("FAIL %s: %s", check, msg)
	}
	return true
}

func (w *world) tracef(format string, args ...any) {
	if !w.cfg.Trace {
		return
	}
	at := w.now().Sub(eventstest.Epoch).Truncate(time.Millisecond)
	w.trace = append(w.trace, fmt.Sprintf("%7d %9s  %s", w.step, at, fmt.Sprintf(format, args...)))
}

// FormatTrace renders the trace, one action a line.
func (r Result) FormatTrace() string { return strings.Join(r.Trace, "\n") + "\n" }

// assign is the assignment for the live sessions.
func (w *world) assign() []string {
	var live []string
	for s := range w.live {
		live = append(live, s)
	}
	return owner.Assign(w.cfg.Partitions, live)
}
