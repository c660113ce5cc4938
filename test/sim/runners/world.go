package runners

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// TTL is every runner's session TTL.
const TTL = eventstest.TTL

// AckWait is the simulated work queue's ack wait: natsstore's.
const AckWait = 30 * time.Second

// Checks the simulation adds to the audit's (audit.CheckNames).
const (
	// CheckHandedOutOnce: no message is handed to an agent twice, by any
	// runner.
	CheckHandedOutOnce = "HandedOutOnce"
	// CheckHandOutAfterLog: a run is started, or a message delivered, only
	// once the log holds the event that consumed it for that run.
	CheckHandOutAfterLog = "HandOutAfterLog"
	// CheckDecide: a core refuses no input the shell may send.
	CheckDecide = "DecideAccepts"
	// CheckLiveness: once the faults stop, every message in the log is
	// consumed and no run stays active.
	CheckLiveness = "ConsumedAll"
	// CheckBound: each is consumed within runner.ConsumeBound of the later
	// of the end of the faults and its post.
	CheckBound = "ConsumedInBound"
	// CheckStore: a store call the shell needs an answer from failed.
	CheckStore = "StoreAnswers"
	// CheckLayout: every claim marker and release is on the subject the
	// seed's layout says (Config.Layout): the run subject under RUNFENCE,
	// the claim subject otherwise.
	CheckLayout = "MarkersOnLayout"
)

// Config configures one run.
type Config struct {
	// Steps is the number of random steps before the faults stop.
	Steps int
	// Trace records every action in Result.Trace.
	Trace bool
	// NATS runs the seed on natsstore against this server (nats.go)
	// instead of memstore.
	NATS *NATS
	// Unfenced wraps every runner's store handle with eventstest.Unfenced:
	// the control that proves the checks can fail.
	Unfenced bool
	// Fatal says which checks end the run; nil means every check.
	// CheckStore always does. The others are counted in Result.Ignored.
	Fatal func(check string) bool
	// Layout is the stream's fence layout: the claim subject's (the zero
	// value), the run subject's (RUNFENCE, issue 23), or the seed's
	// ([eventstest.LayoutBySeed]).
	Layout eventstest.Layout
}

// Result is what one seed did.
type Result struct {
	Seed    uint64
	Steps   int
	Events  int
	Check   string // the check that broke, "" when all held
	Failure string
	Trace   []string
	Stats   Stats
	Work    bool // the runners shared a work queue
	NATS    bool // the seed ran on natsstore
	// RunFence: the seed ran on the run subject's layout (Config.Layout).
	RunFence bool
	// Ignored counts the breaks of checks Config.Fatal let pass.
	Ignored map[string]int
}

// Failed reports whether a check broke.
func (r Result) Failed() bool { return r.Check != "" }

// FormatTrace renders the trace, one action a line.
func (r Result) FormatTrace() string { return strings.Join(r.Trace, "\n") + "\n" }

// Stats counts what a run exercised.
type Stats struct {
	Claims, ClaimErrs, Peeks, Spawns int
	Releases, Reworks                int
	Appends, Fenced, LostAcks, Fails int
	Runs, Steered                    int
	Wakes, Redelivered, Acks         int
	Freezes, Kills, Joins            int
	SessionsLost                     int
	Rechecks, KeptParked             int // from the schedulers
	Consumed                         int
	Drained                          int // actions after the faults stopped
	// On natsstore only: session expiries the simulation carried out for
	// the server (SimExpiries), and those the server's real TTL did
	// first (RealExpiries, a stalled machine: they make a run differ).
	SimExpiries, RealExpiries int
}

// postBook is the client's record of its posts.
type postBook struct {
	n       int
	acked   map[string]uint64
	unacked []string
	thread  map[string]string // message id -> thread
}

type world struct {
	cfg     Config
	seed    uint64
	rng     *rand.Rand
	ctx     context.Context
	done    context.Context // already cancelled: polls without blocking
	clock   *eventstest.Clock
	coreCf  thread.Config
	idle    time.Duration // the thread actors' idle timeout
	work    bool
	threads []string

	subj     events.Subjects   // every handle's: the layout
	log      *memstore.Log     // nil on natsstore
	nats     *natsWorld        // nil on memstore
	names    map[string]string // session id -> its name in traces
	reader   events.Store
	poster   events.Store
	postFlt  faults
	srv      eventstest.Timers
	runners  []*runner
	zombies  []*op
	queue    []*wqItem
	posts    postBook
	noFaults bool
	calm     time.Time // when the faults stopped

	// The checker's copy of the log.
	tail    events.Tail
	envs    []events.Envelope
	auditor *audit.Auditor
	nViol   int
	folds   map[string]*projections.Thread
	handed  map[uint64]string

	step  int
	opts  []option
	trace []string
	res   Result
}

type option struct {
	weight int
	do     func()
}

// Run simulates seed; the same seed and Config give the same result.
func Run(seed uint64, cfg Config) Result {
	w := newWorld(seed, cfg)
	defer w.close()
	if !w.res.Failed() {
		w.run()
	}
	w.res.Seed, w.res.Events, w.res.Trace, w.res.Work, w.res.NATS = seed, len(w.envs), w.trace, w.work, cfg.NATS != nil
	w.res.RunFence = w.subj.RunFence
	return w.res
}

func newWorld(seed uint64, cfg Config) *world {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	w := &world{
		cfg: cfg, seed: seed,
		rng:    rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d)),
		ctx:    context.Background(),
		done:   done,
		clock:  eventstest.NewClock(0),
		folds:  map[string]*projections.Thread{},
		handed: map[uint64]string{},
		posts:  postBook{acked: map[string]uint64{}, thread: map[string]string{}},
	}
	w.srv.Clock = w.clock
	w.names = map[string]string{}
	w.subj.RunFence = cfg.Layout.RunFence(seed)
	if cfg.NATS != nil {
		w.auditor = audit.New()
		if w.openNATS(); w.reader != nil {
			w.auditor = audit.NewWithOptions(audit.Options{Subjects: w.reader.Subjects()})
		}
	} else {
		w.log = memstore.NewLogWith(memstore.LogConfig{
			Mode: memstore.Mode(seed % 2), Now: w.clock.Now, AfterFunc: w.afterFunc,
		})
		w.reader = w.log.Open(memstore.Config{Now: w.clock.Now, Subjects: w.subj})
		w.poster = w.log.Open(memstore.Config{Now: w.clock.Now, Subjects: w.subj, Fault: w.postFlt.hook})
		w.auditor = audit.NewWithOptions(audit.Options{Subjects: w.subj})
		tail, err := w.reader.Tail(w.ctx, w.reader.Subjects().All(), 1)
		if err != nil {
			panic(err) // memstore's Tail fails only on a done context
		}
		w.tail = tail
	}
	w.work = w.rng.IntN(5) != 0
	w.coreCf = thread.Config{Agent: "sim", Steerable: w.rng.IntN(2) == 0, IdleTicks: 1}
	w.idle = time.Duration(1+w.rng.IntN(10)) * time.Second
	nth := 1 + w.rng.IntN(4)
	for i := range nth {
		w.threads = append(w.threads, fmt.Sprintf("t%d", i))
		w.folds[w.threads[i]] = projections.New(w.threads[i])
	}
	n := 2 + w.rng.IntN(3)
	w.tracef("seed %d: %d runners, %d threads, work queue %v, steerable %v, idle %s, log %s, fence on the %s subject, unfenced %v",
		seed, n, nth, w.work, w.coreCf.Steerable, w.idle, w.logName(), eventstest.LayoutOf(w.subj.RunFence), cfg.Unfenced)
	for range n {
		if w.res.Failed() {
			break
		}
		w.join()
	}
	return w
}

// afterFunc is the log's timer: it fires in simulated time.
func (w *world) afterFunc(d time.Duration, f func()) { w.srv.AfterFunc(d, f) }

func (w *world) now() time.Time { return w.clock.Now() }

func (w *world) run() {
	for w.step = 1; w.step <= w.cfg.Steps; w.step++ {
		w.res.Steps = w.step
		w.act()
		if w.check() {
			return
		}
	}
	w.step = -1
	w.drain()
}

// act draws one enabled action by weight and does it.
func (w *world) act() {
	w.opts = w.opts[:0]
	add := func(weight int, do func()) { w.opts = append(w.opts, option{weight, do}) }
	if w.step <= w.cfg.Steps*3/4 {
		// The last quarter posts only as a release races: a post lost
		// then is not saved by a later one to its thread.
		add(5, w.post)
	}
	if len(w.posts.unacked) > 0 {
		add(2, w.repost)
	}
	if len(w.zombies) > 0 {
		add(3, w.doZombie)
	}
	if w.work && w.deliverable() != nil {
		add(8, w.deliverWake)
	}
	live := 0
	for _, r := range w.runners {
		switch r.state {
		case frozen:
			add(2, func() { w.thaw(r) })
		case alive:
			live++
			w.runnerActions(r, add)
		}
	}
	if live > 0 {
		add(1, w.fault)
	}
	if live < 4 && w.work {
		add(1, w.join)
	}
	if w.renewDue() == nil {
		add(8, w.advance)
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

// fault freezes or kills an alive runner. Without a work queue a post is
// found by the follows of the runners running as it lands: they must not
// all restart (runner.Config.Work), so none dies.
func (w *world) fault() {
	var live []*runner
	for _, r := range w.runners {
		if r.state == alive {
			live = append(live, r)
		}
	}
	r := live[w.rng.IntN(len(live))]
	if w.work && w.rng.IntN(5) < 2 {
		w.kill(r)
		return
	}
	w.freeze(r)
}

// runnerActions adds what an alive runner may do next.
func (w *world) runnerActions(r *runner, add func(int, func())) {
	if r.follow < uint64(len(w.envs)) {
		add(8, func() { w.route(r) })
	}
	if len(r.watchQ) > 0 {
		add(8, func() { w.leaseUpdate(r) })
	}
	if !r.renewAt.After(w.now()) {
		add(30, func() { w.keepSession(r) })
	}
	if !r.wake.IsZero() && !r.wake.After(w.now()) {
		add(10, func() { w.tick(r) })
	}
	for _, o := range r.ops {
		if !o.sent {
			add(6, func() { w.send(r, o) })
		} else {
			add(6, func() { w.report(r, o) })
		}
	}
	for _, a := range r.actorsInOrder() {
		if !a.stopping && !a.idleAt.After(w.now()) {
			add(5, func() { w.idleDue(r, a) })
		}
		if len(a.runs) > 0 && !a.stopping {
			add(6, func() { w.progress(r, a) })
		}
	}
}

// renewDue returns an alive runner whose session renewal is due: time does
// not pass it, as a live process renews on time.
func (w *world) renewDue() *runner {
	for _, r := range w.runners {
		if r.state == alive && !r.renewAt.After(w.now()) {
			return r
		}
	}
	return nil
}

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
		for _, a := range r.actors {
			min(a.idleAt)
		}
	}
	for _, it := range w.queue {
		if !it.acked && it.delivered {
			min(it.at.Add(AckWait))
		}
	}
	return at
}

// advance moves simulated time on, never past an alive runner's renewal.
func (w *world) advance() {
	d := time.Duration(1+w.rng.IntN(int(TTL/time.Millisecond)/2)) * time.Millisecond
	to := w.now().Add(d)
	for _, r := range w.runners {
		if r.state == alive && r.renewAt.Before(to) {
			to = r.renewAt
		}
	}
	w.advanceTo(to)
}

// advanceTo moves the clock to t, firing the server's timers on the way.
func (w *world) advanceTo(t time.Time) {
	w.srv.AdvanceTo(t)
	w.tracef("time +%s", w.now().Sub(eventstest.Epoch))
	w.pollWatches()
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
	prefix := fmt.Sprintf("%5d", w.step)
	switch w.step {
	case 0:
		prefix = " init"
	case -1:
		prefix = "drain"
	}
	at := w.now().Sub(eventstest.Epoch).Truncate(time.Millisecond)
	w.trace = append(w.trace, fmt.Sprintf("%s %9s  %s", prefix, at, fmt.Sprintf(format, args...)))
}

// faults injects one fault into the next write of one kind.
type faults struct {
	op string
	f  memstore.Fault
}

func (fs *faults) hook(op, _ string) memstore.Fault {
	if fs.f == memstore.NoFault || op != fs.op {
		return memstore.NoFault
	}
	f := fs.f
	fs.f = memstore.NoFault
	return f
}

// writeFault draws a write's fault: a lost ack, a failed write, or none.
func (w *world) writeFault() memstore.Fault {
	if w.noFaults {
		return memstore.NoFault
	}
	switch x := w.rng.IntN(100); {
	case x < 6:
		w.res.Stats.LostAcks++
		return memstore.LoseAck
	case x < 12:
		w.res.Stats.Fails++
		return memstore.FailBefore
	}
	return memstore.NoFault
}
