package sim

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

// TTL is the lease TTL every claim asks for.
const TTL = eventstest.TTL

// threadID is the one thread every process contends for.
const threadID = "sim"

// Checks the simulation adds to the audit's (audit.CheckNames).
const (
	// CheckHandedOutOnce: no message is handed to an agent twice, as a
	// prompt, an answer or steering, by any process.
	CheckHandedOutOnce = "HandedOutOnce"
	// CheckHandOutAfterLog: a run is started, or a message delivered, only
	// after the log holds the event that consumed the message for that run.
	CheckHandOutAfterLog = "HandOutAfterLog"
	// CheckPostIdempotent: a repeated post returns the original sequence.
	CheckPostIdempotent = "PostIdempotent"
	// CheckRepostNoMessage: a message id is one message: no two messages
	// share one, and no run takes a message_posted whose message id the
	// thread had already (a forged or late repost) as its prompt.
	CheckRepostNoMessage = "RepostNoMessage"
	// CheckDecide: Decide refuses no input the shell may send (only run
	// reports of runs the core no longer holds may be refused).
	CheckDecide = "DecideAccepts"
	// CheckDrain: after the drain, every posted message, acknowledged or
	// not, was consumed, and no run is active.
	CheckDrain = "DrainConsumesAll"
	// CheckBound: once the faults stop, every message is consumed within
	// runner.ConsumeBound of the later of the end of the faults and its
	// post, on the drainer's clock.
	CheckBound = "ConsumedInBound"
	// CheckReplay: auditing the whole log from scratch at the end gives the
	// same verdict as the audit kept up after every step.
	CheckReplay = "AuditReplay"
	// CheckLayout: every claim marker and release is on the subject the
	// seed's layout says (Config.Layout): the run subject under RUNFENCE,
	// the claim subject otherwise.
	CheckLayout = "MarkersOnLayout"
)

// Config configures one run of the simulation.
type Config struct {
	// Steps is the number of random steps before the drain.
	Steps int
	// Unfenced wraps every process's store handle with eventstest.Unfenced:
	// the mutation run, which must be caught.
	Unfenced bool
	// Fatal says which checks end the run. Nil means every check.
	Fatal func(check string) bool
	// Trace records every action in Result.Trace. Off, a run is faster;
	// a failing seed is replayed with it on.
	Trace bool
	// NATS, when set, runs the seed on natsstore against this server (a
	// fresh stream and buckets per seed) instead of on memstore: see
	// nats.go.
	NATS *NATS
	// Layout is the stream's fence layout: the claim subject's (the zero
	// value), the run subject's (RUNFENCE, issue 23), or the seed's
	// ([eventstest.LayoutBySeed]).
	Layout eventstest.Layout
}

// ModeOf is the log mode seed runs in: odd seeds check before they
// deduplicate, as a single-server (R1) stream does, even seeds the other
// way round, as a replicated (R3) one does. Any two consecutive seeds
// cover both.
func ModeOf(seed uint64) memstore.Mode {
	if seed%2 == 1 {
		return memstore.Single
	}
	return memstore.Replicated
}

// Result is what one seed did.
type Result struct {
	Seed   uint64
	Steps  int // random steps taken (the failing one included)
	Events int // events in the log at the end
	// Check is the check that ended the run, "" when every check held.
	Check   string
	Failure string   // what broke, with the log sequences involved
	Trace   []string // the actions, one per line, when Config.Trace
	Stats   Stats
	Mode    memstore.Mode // the log's mode (ModeOf the seed; Single on NATS)
	// RunFence: the seed ran on the run subject's layout (Config.Layout).
	RunFence bool
	NATS     NATSStats // what the faults exercised inside natsstore
}

// Failed reports whether a fatal check broke.
func (r Result) Failed() bool { return r.Check != "" }

// Stats counts what a run exercised.
type Stats struct {
	Claims     int // claims that succeeded
	Takeovers  int // of which found a run of an older claim active
	Appends    int // core appends carried out (zombies included)
	Fenced     int // of which refused by the fence (ErrThreadBusy)
	Conflicts  int // of which refused by a compare-and-set (ErrConflict)
	LostAcks   int // writes whose ack was lost (they landed)
	FailWrites int // writes failed before landing
	LateWrites int // appends that stayed in flight past their timeout (landsLate)
	Drains     int // cores asked to drain (drainCore)
	Crashes    int
	Runs       int // runs started
	Steered    int // messages handed to runs as steering
	DupObserve int // duplicate Observed deliveries
	Drained    int // actions the drain took
}

// proc is one simulated runner process: a store handle with its own clock
// and faults, and, while it holds a claim, a thread core with the shell's
// pending work.
type proc struct {
	id     int
	clock  *eventstest.Clock
	store  events.Store
	faults faults
	claims int // claim attempts, to name holders

	core   *thread.Core // nil while the process holds no claim
	holder string
	lease  events.Lease   // the lease as last renewed
	out    []effect       // Ready work not yet carried out against the store
	inbox  []thread.Input // results (AppendDone, Synced) not yet fed to the core
	cursor uint64         // last sequence delivered as Observed
	runs   []*run         // the simulated agent's runs
}

func (p *proc) name() string {
	if p.core != nil {
		return p.holder
	}
	return fmt.Sprintf("p%d", p.id)
}

// run is a run the agent executes.
type run struct {
	id        string
	asked     int
	cancelled bool
}

// effectKind is the I/O a Ready asks of the shell.
type effectKind uint8

const (
	doAppend effectKind = iota
	doSync
	doRelease
)

// effect is one piece of I/O a core asked for. Effects of a core that has
// stopped or crashed are zombies: in flight, they may still land.
type effect struct {
	kind  effectKind
	owner *proc
	by    string // the holder that asked
	app   thread.Append
	claim events.Claim   // for doRelease
	rel   thread.Release // for doRelease: the core's, its RunSeq the release's K
	late  bool           // an append that stayed in flight (landsLate)
}

// faults is a process's fault hook: it injects one fault into the next
// write of one kind, as drawn by the PRNG.
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

// postBook is the posting client's record of its posts.
type postBook struct {
	n       int
	acked   map[string]uint64 // message id -> acknowledged sequence
	unacked []string          // ids whose post failed or lost its ack
	ids     []string          // every id, in posting order
}

// world is one seed's simulation: processes, one log, one PRNG.
type world struct {
	cfg    Config
	seed   uint64
	rng    *rand.Rand
	ctx    context.Context
	coreCf thread.Config
	subj   events.Subjects // every handle's: the layout

	log      *memstore.Log // nil on NATS
	reader   events.Store  // fault-free handle for the checker
	poster   events.Store
	nats     *natsWorld // the seed's natsstore side, or nil
	postFlt  faults
	procs    []*proc
	zombies  []effect
	posts    postBook
	noFaults bool // the drain runs without faults

	// The checker's copy of the log, audited and folded as it grows.
	envs    []events.Envelope
	last    uint64
	auditor *audit.Auditor
	fold    *projections.Thread
	nViol   int               // violations seen so far
	handed  map[uint64]string // message seq -> run and holder it was handed to

	step  int // the current step, 1..Steps; 0 before, -1 in the drain
	opts  []option
	trace []string
	res   Result
}

type option struct {
	weight int
	do     func()
}

// Run simulates seed. It is deterministic: the same seed and Config give
// the same actions and the same result.
func Run(seed uint64, cfg Config) Result {
	w := newWorld(seed, cfg)
	defer w.close()
	if !w.res.Failed() {
		w.run()
	}
	w.res.Seed, w.res.Events, w.res.Trace, w.res.Mode = seed, len(w.envs), w.trace, ModeOf(seed)
	w.res.RunFence = w.subj.RunFence
	if w.nats != nil {
		w.res.Mode = memstore.Single // one server checks before it deduplicates
	}
	return w.res
}

func newWorld(seed uint64, cfg Config) *world {
	w := &world{
		cfg:    cfg,
		seed:   seed,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		ctx:    context.Background(),
		fold:   projections.New(threadID),
		handed: make(map[uint64]string),
		posts:  postBook{acked: make(map[string]uint64)},
	}
	w.subj.RunFence = cfg.Layout.RunFence(seed)
	if cfg.NATS != nil {
		w.openNATS()
	} else {
		w.log = memstore.NewLogWith(memstore.LogConfig{Mode: ModeOf(seed)})
		w.reader = w.log.Open(memstore.Config{Subjects: w.subj})
		w.poster = w.log.Open(memstore.Config{Subjects: w.subj, Fault: w.postFlt.hook})
	}
	w.auditor = w.newAuditor()
	w.coreCf = thread.Config{
		Agent:     "sim",
		Steerable: w.rng.IntN(2) == 0,
		IdleTicks: []int{0, 2, 4}[w.rng.IntN(3)],
	}
	n := 2 + w.rng.IntN(3)
	for i := range n {
		skew := time.Duration(w.rng.IntN(10_000)-5_000) * time.Millisecond
		p := &proc{id: i + 1, clock: eventstest.NewClock(skew)}
		var s events.Store
		if w.nats != nil {
			s = w.openNATSProc(p)
		} else {
			s = w.log.Open(memstore.Config{Now: p.clock.Now, Subjects: w.subj, Fault: p.faults.hook})
		}
		if cfg.Unfenced {
			s = eventstest.Unfenced(s)
		}
		p.store = s
		w.procs = append(w.procs, p)
	}
	w.tracef("seed %d: %d processes, steerable=%v, idle ticks %d, unfenced=%v, log %s, fence on the %s subject",
		seed, n, w.coreCf.Steerable, w.coreCf.IdleTicks, cfg.Unfenced, w.logName(), eventstest.LayoutOf(w.subj.RunFence))
	return w
}

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

// act draws one action among those enabled, by weight, and does it.
func (w *world) act() {
	w.opts = w.opts[:0]
	add := func(weight int, do func()) { w.opts = append(w.opts, option{weight, do}) }
	add(5, w.post)
	if len(w.posts.ids) > 0 {
		add(2, w.repost)
		if w.log != nil {
			add(1, w.forgeRepost)
		}
	}
	add(3, w.lapse)
	add(2, w.drift)
	if len(w.zombies) > 0 {
		add(4, w.doZombie)
	}
	for _, p := range w.procs {
		if p.core == nil {
			add(2, func() { w.claim(p) })
			continue
		}
		if len(p.out) > 0 {
			add(10, func() { w.doEffect(p) })
		}
		if len(p.inbox) > 0 {
			add(8, func() { w.input(p) })
		}
		if p.cursor < w.last {
			add(10, func() { w.observe(p) })
		}
		if p.cursor > 0 {
			add(1, func() { w.observeDup(p) })
		}
		if len(p.runs) > 0 {
			add(10, func() { w.progress(p) })
		}
		add(2, func() { w.tick(p) })
		add(1, func() { w.drainCore(p) })
		add(2, func() { w.renew(p) })
		add(1, func() { w.crash(p) })
	}
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

// fail records that check broke. It returns whether the check is fatal.
func (w *world) fail(check, msg string) bool {
	if w.cfg.Fatal != nil && !w.cfg.Fatal(check) {
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
	w.trace = append(w.trace, prefix+"  "+fmt.Sprintf(format, args...))
}

// FormatTrace renders a result's trace and failure for a test log.
func (r Result) FormatTrace() string {
	var b strings.Builder
	for _, l := range r.Trace {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
