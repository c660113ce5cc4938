package eventgen

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Fault is a kind of bad write the simulation plants.
type Fault int

// The faults. All but the chaos ones leave the thread's state as the
// well-behaved writers see it, so the log stays clean around them and each is
// detected exactly once, by the check named in its comment.
const (
	// FaultGarbage stores bytes that are not an event: an anomaly.
	FaultGarbage Fault = iota
	// FaultHeader stores a post whose type header names run_started: an anomaly.
	FaultHeader
	// FaultStaleFence abandons a run under an old claim: FenceNewestClaim.
	FaultStaleFence
	// FaultReconsume answers an unknown request with a consumed message:
	// I1_ConsumedAtMostOnce.
	FaultReconsume
	// FaultChainBreak releases with a wrong expected sequence: ClaimChain.
	FaultChainBreak
	// FaultEndAfterAbandon completes an abandoned run: NoEndAfterAbandon.
	FaultEndAfterAbandon
	// FaultAnswerTwice answers an answered request again: AnswerOnce.
	FaultAnswerTwice

	// FaultRandom (chaos) stores an event with random fields.
	FaultRandom
	// FaultRepeat (chaos) redelivers an earlier envelope.
	FaultRepeat
	// FaultBadSubject (chaos) stores bytes on a malformed subject with a bad
	// expected-sequence header.
	FaultBadSubject

	numFaults
	numCleanFaults = FaultRandom
)

// Config shapes a simulated log.
type Config struct {
	Threads int     // number of threads, at least 1
	Events  int     // stop after this many envelopes
	Faults  float64 // probability that a step plants a fault
	Chaos   bool    // also plant faults that disturb the state
}

// Stats counts the faults planted, by kind.
type Stats struct {
	Faults [numFaults]int
}

type simThread struct {
	id      string
	w       Writer // current holder; ClaimSeq 0 when unclaimed
	claimed bool
	holders int
	claims  []uint64 // every claim marker's sequence

	posted []uint64
	next   int // index of the oldest pending message

	run      string // active run, "" when none
	runClaim uint64
	runs     int
	open     []string // unanswered requests of the active run
	reqs     int

	abandoned []string
	answered  []struct{ run, req string }
}

func (s *simThread) pending() bool { return s.next < len(s.posted) }

type sim struct {
	r     *rand.Rand
	l     *Log
	cfg   Config
	stats Stats
	ts    []*simThread
}

// Random simulates cfg.Threads threads written by well-behaved posters and
// claim holders (claims, takeovers that abandon, runs, requests, answers,
// steering, releases), interleaved at random, planting faults with
// probability cfg.Faults. With Faults 0 the log is clean.
func Random(r *rand.Rand, cfg Config) (*Log, Stats) {
	s := &sim{r: r, l: NewLog(), cfg: cfg}
	for i := range max(cfg.Threads, 1) {
		id := fmt.Sprintf("t%d", i)
		s.ts = append(s.ts, &simThread{id: id, w: Writer{Thread: id}})
	}
	for len(s.l.Envs) < cfg.Events {
		t := s.ts[r.IntN(len(s.ts))]
		if cfg.Faults > 0 && r.Float64() < cfg.Faults {
			s.fault(t)
			continue
		}
		s.step(t)
	}
	return s.l, s.stats
}

func (s *sim) step(t *simThread) {
	r := s.r
	switch {
	case !t.claimed:
		if r.IntN(2) == 0 {
			s.post(t)
		} else {
			s.claim(t)
		}
	case t.run == "":
		switch n := r.IntN(20); {
		case n < 10 && t.pending():
			s.start(t)
		case n < 16:
			s.post(t)
		case n < 18:
			s.release(t)
		default:
			s.claim(t) // a takeover: the old holder's lease lapsed
		}
	default:
		s.runStep(t)
	}
}

func (s *sim) runStep(t *simThread) {
	l, w := s.l, t.w
	switch n := s.r.IntN(20); {
	case n < 5:
		s.post(t)
	case n < 8:
		l.CAS(w.Output(t.run, "out"))
	case n < 10 && len(t.open) < 2:
		t.reqs++
		q := fmt.Sprintf("q%d", t.reqs)
		t.open = append(t.open, q)
		l.CAS(w.Opened(t.run, q))
	case n < 13 && len(t.open) > 0 && t.pending():
		q := t.open[0]
		t.open = t.open[1:]
		l.Fenced(w.Answer(t.run, q, t.posted[t.next]))
		t.next++
		t.answered = append(t.answered, struct{ run, req string }{t.run, q})
	case n < 15 && len(t.open) == 0 && t.pending():
		l.Fenced(w.Steer(t.run, t.posted[t.next]))
		t.next++
	case n < 17:
		l.CAS(w.Completed(t.run))
		t.endRun()
	case n < 18:
		l.CAS(w.Failed(t.run))
		t.endRun()
	default:
		s.claim(t) // a takeover, which abandons the run
	}
}

func (t *simThread) endRun() { t.run, t.open = "", nil }

func (s *sim) post(t *simThread) {
	w := Writer{Thread: t.id}
	env := s.l.Post(w.Post(fmt.Sprintf("%s-m%d", t.id, s.l.Seq()+1), "hello"))
	t.posted = append(t.posted, env.Seq)
}

// claim makes a new holder claim t, then abandons the active run, as DESIGN
// §3 steps 3 and 5 do.
func (s *sim) claim(t *simThread) {
	t.holders++
	w := Writer{Thread: t.id, Holder: fmt.Sprintf("%s-h%d", t.id, t.holders)}
	w.ClaimSeq = s.l.CAS(w.Claimed(uint64(t.holders))).Seq
	t.w, t.claimed = w, true
	t.claims = append(t.claims, w.ClaimSeq)
	if t.run != "" {
		s.l.Fenced(w.Abandoned(t.run, t.runClaim))
		t.abandoned = append(t.abandoned, t.run)
		t.endRun()
	}
}

func (s *sim) release(t *simThread) {
	s.l.CAS(t.w.Released())
	t.w, t.claimed = Writer{Thread: t.id}, false
}

func (s *sim) start(t *simThread) {
	t.runs++
	t.run, t.runClaim = fmt.Sprintf("r%d", t.runs), t.w.ClaimSeq
	s.l.Fenced(t.w.Started(t.run, t.posted[t.next]))
	t.next++
}

func (s *sim) fault(t *simThread) {
	r, l := s.r, s.l
	n := numCleanFaults
	if s.cfg.Chaos {
		n = numFaults
	}
	f := Fault(r.IntN(int(n)))
	switch f {
	case FaultGarbage:
		kinds := []events.Kind{events.KindPosted, events.KindClaim, events.KindRun}
		typ := events.TypeRunStarted
		l.Raw(l.Subjects.Thread(t.id, kinds[r.IntN(3)]), Header(typ), s.bytes(r.IntN(24)))
	case FaultHeader:
		ev := Writer{Thread: t.id}.Post("forged", "x")
		l.Raw(l.SubjectOf(ev), Header(events.TypeRunStarted), Marshal(ev))
	case FaultStaleFence:
		w := t.w
		w.Holder, w.ClaimSeq = "zombie", 0
		if len(t.claims) > 1 {
			w.ClaimSeq = t.claims[r.IntN(len(t.claims)-1)]
		}
		l.Fenced(w.Abandoned("zombie-run", w.ClaimSeq))
	case FaultReconsume:
		if !t.claimed || t.next == 0 {
			return
		}
		l.Fenced(t.w.Answer("no-run", "no-request", t.posted[r.IntN(t.next)]))
	case FaultChainBreak:
		w := Writer{Thread: t.id, Holder: "forger"}
		subj := l.Subjects.Thread(t.id, events.KindClaim)
		l.Event(w.Released(), events.ExpectLast(l.LastOn(subj)+7))
	case FaultEndAfterAbandon:
		if len(t.abandoned) == 0 {
			return
		}
		w := t.w
		w.Holder = "zombie"
		l.CAS(w.Completed(t.abandoned[r.IntN(len(t.abandoned))]))
	case FaultAnswerTwice:
		if !t.claimed || len(t.answered) == 0 {
			return
		}
		a := t.answered[r.IntN(len(t.answered))]
		l.Fenced(t.w.Answer(a.run, a.req, 0)) // message 0 is never posted
	case FaultRandom:
		s.randomEvent(t)
	case FaultRepeat:
		if len(l.Envs) == 0 {
			return
		}
		l.Repeat(r.IntN(len(l.Envs)))
	case FaultBadSubject:
		subjects := []string{"threads." + t.id, "other." + t.id + ".run", "threads.bad id.run", "threads." + t.id + ".zzz", ""}
		h := Header(events.TypeRunOutput)
		h[events.HeaderExpectSeq] = []string{"not-a-number"}
		l.Raw(subjects[r.IntN(len(subjects))], h, s.bytes(r.IntN(16)))
	}
	s.stats.Faults[f]++
}

// randomEvent stores a valid event with fields drawn from small ranges, so
// that they collide with real runs, requests, messages and claims.
func (s *sim) randomEvent(t *simThread) {
	r, l := s.r, s.l
	w := Writer{Thread: t.id, Holder: t.w.Holder, ClaimSeq: t.w.ClaimSeq}
	if r.IntN(3) == 0 {
		w.ClaimSeq = uint64(r.IntN(int(l.Seq()) + 2))
	}
	run := fmt.Sprintf("r%d", r.IntN(t.runs+2))
	req := fmt.Sprintf("q%d", r.IntN(t.reqs+2))
	msg := uint64(r.IntN(int(l.Seq()) + 2))
	var ev *eventspb.Event
	switch r.IntN(11) {
	case 0:
		ev = w.Post(fmt.Sprintf("rand-%d", l.Seq()+1), "x") // ids are one message each (a repost is not one)
	case 1:
		ev = w.Claimed(uint64(r.IntN(5)))
	case 2:
		ev = w.Released()
	case 3:
		ev = w.Started(run, msg)
	case 4:
		ev = w.Output(run, "x")
	case 5:
		ev = w.Opened(run, req)
	case 6:
		ev = w.Answer(run, req, msg)
	case 7:
		ev = w.Steer(run, msg)
	case 8:
		ev = w.Completed(run)
	case 9:
		ev = w.Failed(run)
	default:
		ev = w.Abandoned(run, uint64(r.IntN(int(l.Seq())+2)))
	}
	checks := []events.Check{{}, events.ExpectLast(uint64(r.IntN(int(l.Seq()) + 2))), {Mode: events.CheckFence, Seq: ev.GetClaimSeq()}}
	l.Event(ev, checks[r.IntN(len(checks))])
}

func (s *sim) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(s.r.Uint32())
	}
	return b
}

// FromBytes turns fuzz input into a log: data drives every choice of a chaotic
// simulation (faults of every kind, with raw payloads and subjects), and a
// fixed generator takes over when it runs out, so any input gives a finite,
// deterministic log of at most 400 envelopes.
func FromBytes(data []byte) *Log {
	h := fnv.New64a()
	h.Write(data)
	src := &byteSource{data: data, fallback: rand.NewPCG(h.Sum64(), uint64(len(data)))}
	r := rand.New(src)
	cfg := Config{
		Threads: 1 + r.IntN(3),
		Events:  min(2*len(data), 400),
		Faults:  float64(r.IntN(5)) / 8,
		Chaos:   true,
	}
	l, _ := Random(r, cfg)
	return l
}

// byteSource is a rand.Source whose top byte comes from the fuzz input, so
// that small choices (IntN of a few values) follow the input.
type byteSource struct {
	data     []byte
	i        int
	fallback *rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	v := s.fallback.Uint64()
	if s.i < len(s.data) {
		v = uint64(s.data[s.i])<<56 | v>>8
		s.i++
	}
	return v
}
