package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections"
)

var (
	flagForger = flag.String("chaos.forger", os.Getenv("SOAK_FORGER"), "chaos: fault phase of the forger case, such as 2m (default 20s)")
	flagAim    = flag.String("chaos.forger.aim", os.Getenv("CHAOS_FORGER_AIM"), "chaos: chance, 0..1, that the forger forges a consuming event right after an honest post lands, aiming at the window of issue 23 item 1 (default 0)")
)

// forgeConfig is the runner-credential forger's (issue 23, item 2).
type forgeConfig struct {
	gap [2]time.Duration // between two timed forgeries
	// minAge: a timed consuming forgery takes a pending post only when it
	// and its thread's claim are this old: past two of the longest stalls
	// in a row (a claim's abandon, then its start), so that no holder's
	// write from an earlier read is still in flight (the known gap).
	// With aim on, it is 1.5 TTL, inside that window.
	minAge time.Duration
	// aim is the chance, per honest post on a held thread, of a forged
	// run_started consuming it at once: it lands between the holder's read
	// and its fenced write now and then (the known gap, issue 23 item 1).
	aim float64
}

// idleMissesMax is how many idle forgeries in a row may find no old post
// before one takes a fresh post.
const idleMissesMax = 5

// forgeKind is a row of issue 23's table of forgeries.
type forgeKind string

const (
	kindSecondEnd   forgeKind = "second_run_completed"     // 1: the active run's end, its holder's claim, valid CAS
	kindNoClaimEnd  forgeKind = "run_completed_no_claim"   // 2: claim_seq 0
	kindClaimGhost  forgeKind = "claim_then_ghost_end"     // 3: thread_claimed (CAS), then the end of a run never started
	kindStartActive forgeKind = "run_started_while_active" // 4: fenced under the honest claim
	kindStartIdle   forgeKind = "run_started_idle"         // 4: fenced, the oldest pending post, no run active
	kindAnswer      forgeKind = "answer_given_no_request"  // 5: fenced, a request never opened
	kindLease       forgeKind = "lease_until_2100"         // 6: $KV.<bucket>.<thread>, no session, no TTL
	// Issue 25: the first-post index's entry of a new id, written before
	// its post and naming an event that is no post of it; then the post,
	// then a raw repost of its id, which no run may take.
	kindFirstEntry forgeKind = "first_post_entry_then_repost"
)

var forgeKinds = []forgeKind{kindSecondEnd, kindNoClaimEnd, kindClaimGhost, kindStartActive, kindStartIdle, kindAnswer, kindLease, kindFirstEntry}

// forgedEvent is one stored forged event. A forgery is one or two of them
// (kindClaimGhost: the marker, then the end), sharing id.
type forgedEvent struct {
	id     int // the forgery
	kind   forgeKind
	thread string
	typ    events.Type
	seq    uint64 // its sequence; the lease bucket's for a lease; 0 until read back
	msgID  string
	msg    uint64 // the message it consumes, 0 when none; a lease's, the post after it
	aimed  bool
	acked  bool // its append was acknowledged; else its outcome is unknown
}

// forger is a writer with runner credentials and its own store: it follows
// the stream to know each thread's claim, active run and pending posts, and
// stores the table's forgeries with the checks a runner would use.
type forger struct {
	h   *harness
	cfg forgeConfig
	nc  *nats.Conn
	s   *natsstore.Store
	js  jetstream.JetStream
	n   atomic.Int64 // message ids
	ids atomic.Int64 // forgeries
	// idleMisses counts the idle forgeries in a row that found no thread
	// to take (see kindStartIdle).
	idleMisses atomic.Int64

	mu       sync.Mutex // protects the fields below
	views    map[string]*projections.Thread
	started  map[string]time.Time // when each thread's newest run_started was stored
	claimed  map[string]time.Time // when each thread's newest thread_claimed was stored
	recs     []forgedEvent
	forgedOn map[string]bool // threads forged on

	stats counters // stored:, refused:, skipped:, unknown: by kind
	aimCh chan [2]uint64
}

func forgerConfig(t *testing.T) config {
	c := soakConfig(t)
	c.name = "forger"
	c.runners, c.threads = 3, 14
	c.faults = duration(t, *flagForger, "-chaos.forger / SOAK_FORGER", 20*time.Second)
	c.drain = 60 * time.Second
	// Forged leases hold their thread this long, then runners reclaim them.
	c.unexplainedLease = 2 * time.Second
	aim := 0.0
	if *flagAim != "" {
		var err error
		if aim, err = strconv.ParseFloat(*flagAim, 64); err != nil || aim < 0 || aim > 1 {
			t.Fatalf("-chaos.forger.aim / CHAOS_FORGER_AIM %q: want a chance in 0..1", *flagAim)
		}
	}
	minAge := time.Duration(2*c.stall[1]*float64(c.ttl)) + c.ttl
	if aim > 0 {
		minAge = 3 * c.ttl / 2
	}
	c.forge = &forgeConfig{gap: [2]time.Duration{150 * time.Millisecond, 500 * time.Millisecond}, minAge: minAge, aim: aim}
	if *flagGuard == "" {
		// The guard closes the window the forger aims at; on a single
		// server auto would leave it off.
		c.guard = natsstore.GuardOn
	}
	return c
}

// startForger opens the forger's store and starts it; the returned func
// stops it and closes its store.
func (h *harness) startForger() (f *forger, stop func()) {
	h.t.Helper()
	nc, s, err := h.openStore("forger", time.Now)
	if err != nil {
		h.t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		h.t.Fatal(err)
	}
	f = &forger{h: h, cfg: *h.cfg.forge, nc: nc, s: s, js: js, views: map[string]*projections.Thread{}, started: map[string]time.Time{}, claimed: map[string]time.Time{},
		forgedOn: map[string]bool{}, aimCh: make(chan [2]uint64, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.follow(ctx) })
	wg.Go(func() { f.loop(ctx) })
	var once sync.Once
	return f, func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			s.Close()
			nc.Close()
		})
	}
}

// follow folds every thread from the stream, and hands honest posts to
// aim.
func (f *forger) follow(ctx context.Context) {
	var tail events.Tail
	var from uint64 = 1
	for ctx.Err() == nil {
		if tail == nil {
			var err error
			if tail, err = f.s.Tail(ctx, events.Subjects{}.All(), from); err != nil {
				if !sleepCtx(ctx, 100*time.Millisecond) {
					return
				}
				continue
			}
		}
		env, err := tail.Next(ctx)
		if err != nil {
			tail.Stop()
			tail = nil
			continue
		}
		from = env.Seq + 1
		f.mu.Lock()
		v := f.views[env.Thread]
		if v == nil {
			v = projections.New(env.Thread)
			f.views[env.Thread] = v
		}
		v.Apply(env)
		switch env.Type {
		case events.TypeRunStarted:
			f.started[env.Thread] = env.Stored
		case events.TypeThreadClaimed:
			f.claimed[env.Thread] = env.Stored
		}
		f.mu.Unlock()
		if f.cfg.aim > 0 && env.Type == events.TypeMessagePosted && f.h.faultsOn.Load() {
			select {
			case f.aimCh <- [2]uint64{uint64(f.h.threadIndex(env.Thread)), env.Seq}:
			default:
			}
		}
	}
	if tail != nil {
		tail.Stop()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *harness) threadIndex(th string) int {
	for i, x := range h.threads {
		if x == th {
			return i
		}
	}
	return -1
}

// loop forges while the faults are on: a timed forgery of the next kind
// that some thread allows, and aimed ones as posts land.
func (f *forger) loop(ctx context.Context) {
	next := 0
	timer := time.NewTimer(f.h.rng.dur(f.cfg.gap))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-f.aimCh:
			if p[0] < uint64(len(f.h.threads)) && f.h.rng.chance(f.cfg.aim) {
				f.forgeAimed(ctx, f.h.threads[p[0]], p[1])
			}
		case <-timer.C:
			if f.h.faultsOn.Load() {
				// The kinds in turn; one no thread allows now waits its next turn.
				for range forgeKinds {
					k := forgeKinds[next%len(forgeKinds)]
					next++
					if f.forge(ctx, k) {
						break
					}
					f.stats.add("skipped:"+string(k), 1)
				}
			}
			timer.Reset(f.h.rng.dur(f.cfg.gap))
		}
	}
}

// snap is what the forger knows of a thread.
type snap struct {
	claim  projections.Claim
	active *projections.Run
	oldest *projections.Message // the oldest pending post, if any
	taken  uint64
	since  time.Time // when the newest run_started was stored
	claim0 time.Time // when the newest thread_claimed was stored
}

func (s snap) held() bool {
	return s.claim.Seq != 0 && !s.claim.Released && !strings.HasPrefix(s.claim.Holder, "forger")
}

// pick returns a thread whose snap ok accepts: first among those not yet
// forged on (the spec's validator judges a thread up to its first
// nonconforming event only), in an order the seeded PRNG draws.
func (f *forger) pick(ok func(snap) bool) (string, snap, bool) {
	n := len(f.h.threads)
	off := f.h.rng.intN(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fresh := range []bool{true, false} {
		for i := range n {
			th := f.h.threads[(off+i)%n]
			if f.forgedOn[th] == fresh {
				continue
			}
			if s, have := f.snapLocked(th); have && ok(s) {
				f.forgedOn[th] = true
				return th, s, true
			}
		}
	}
	return "", snap{}, false
}

func (f *forger) snapLocked(th string) (snap, bool) {
	v := f.views[th]
	if v == nil {
		return snap{}, false
	}
	s := snap{claim: v.Claim, taken: v.Taken, since: f.started[th], claim0: f.claimed[th]}
	if v.ActiveRun != nil {
		r := *v.ActiveRun
		s.active = &r
	}
	if m, ok := v.OldestPending(); ok {
		s.oldest = &m
	}
	return s, true
}

// old reports whether s's oldest pending post and its claim are both
// older than minAge: the holder read the post at the latest when it
// claimed, and a write it made from that read has landed by now.
func (f *forger) old(s snap) bool {
	return s.oldest != nil && time.Since(s.oldest.Posted) >= f.cfg.minAge && time.Since(s.claim0) >= f.cfg.minAge
}

// forge stores one forgery of kind k, if some thread allows it now.
func (f *forger) forge(ctx context.Context, k forgeKind) bool {
	id := int(f.ids.Add(1))
	now := time.Now()
	switch k {
	case kindSecondEnd:
		// A run that started just now, whose holder is likely alive and
		// will write for it after the forged end; a long one is mostly a
		// stalled holder's.
		th, s, ok := f.pick(func(s snap) bool { return s.active != nil && s.held() && time.Since(s.since) < f.h.cfg.delay/2 })
		if !ok {
			th, s, ok = f.pick(func(s snap) bool { return s.active != nil && s.held() })
		}
		if !ok {
			return false
		}
		c := events.Claim{Thread: th, Seq: s.active.ClaimSeq, Holder: s.active.Holder}
		f.appendLast(ctx, id, k, events.NewRunCompleted(c, now, s.active.ID, "forged end"), false)
	case kindNoClaimEnd:
		th, s, ok := f.pick(func(s snap) bool { return s.active != nil })
		if !ok {
			return false
		}
		c := events.Claim{Thread: th, Holder: "forger"}
		f.appendLast(ctx, id, k, events.NewRunCompleted(c, now, s.active.ID, "forged end"), false)
	case kindClaimGhost:
		th, _, ok := f.pick(func(s snap) bool { return s.held() })
		if !ok {
			return false
		}
		holder := fmt.Sprintf("forger/%d", id)
		marker := &eventspb.Event{Thread: th, Holder: holder, Body: &eventspb.Event_ThreadClaimed{
			ThreadClaimed: &eventspb.ThreadClaimed{Holder: holder, LeaseRevision: 1, LeaseTtlMs: 3000}}}
		// The marker goes where the layout keeps them (appendLast): the
		// claim subject, or under RUNFENCE the run subject.
		seq, ok := f.appendLast(ctx, id, k, marker, false)
		if !ok {
			return true
		}
		c := events.Claim{Thread: th, Seq: seq, Holder: holder}
		f.appendLast(ctx, id, k, events.NewRunCompleted(c, now, fmt.Sprintf("ghost-%d", id), "forged end"), false)
	case kindStartActive:
		th, s, ok := f.pick(func(s snap) bool { return s.active != nil && s.held() })
		if !ok {
			return false
		}
		// A pending post its holder is not about to take, or else the
		// active run's own prompt (consumed already: I1 too).
		prompt := s.active.PromptSeq
		if f.old(s) {
			prompt = s.oldest.Seq
		}
		c := events.Claim{Thread: th, Seq: s.claim.Seq, Holder: s.claim.Holder}
		f.appendFenced(ctx, id, k, events.NewRunStarted(c, now, fmt.Sprintf("forged-%d", id), prompt, "forger"), c, false)
	case kindStartIdle:
		// The table's case, the oldest pending post, needs one its holder
		// left waiting; or else the last consumed message (I1 too).
		prompt := func(s snap) uint64 { return s.oldest.Seq }
		th, s, ok := f.pick(func(s snap) bool { return s.active == nil && s.held() && f.old(s) })
		if !ok {
			prompt = func(s snap) uint64 { return s.taken }
			th, s, ok = f.pick(func(s snap) bool { return s.active == nil && s.held() && s.oldest == nil && s.taken != 0 })
		}
		if !ok && f.idleMisses.Add(1) >= idleMissesMax {
			// Busy threads leave neither for a while: take a fresh oldest
			// post, which the holder may be taking too (the known gap,
			// logged when it happens), rather than store none of the kind.
			prompt = func(s snap) uint64 { return s.oldest.Seq }
			th, s, ok = f.pick(func(s snap) bool { return s.active == nil && s.held() && s.oldest != nil })
		}
		if !ok {
			return false
		}
		f.idleMisses.Store(0)
		c := events.Claim{Thread: th, Seq: s.claim.Seq, Holder: s.claim.Holder}
		f.appendFenced(ctx, id, k, events.NewRunStarted(c, now, fmt.Sprintf("forged-%d", id), prompt(s), "forger"), c, false)
	case kindAnswer:
		th, s, ok := f.pick(func(s snap) bool { return s.held() && (f.old(s) || s.taken != 0) })
		if !ok {
			return false
		}
		msg := s.taken // consumed already: I1 too
		if f.old(s) {
			msg = s.oldest.Seq
		}
		run := "none"
		if s.active != nil {
			run = s.active.ID
		}
		c := events.Claim{Thread: th, Seq: s.claim.Seq, Holder: s.claim.Holder}
		f.appendFenced(ctx, id, k, events.NewAnswerGiven(c, now, run, fmt.Sprintf("forged-q-%d", id), msg), c, false)
	case kindLease:
		th, _, ok := f.pick(func(snap) bool { return true })
		if !ok {
			return false
		}
		f.forgeLease(ctx, id, th)
	case kindFirstEntry:
		th, s, ok := f.pick(func(s snap) bool { return s.claim.Seq != 0 })
		if !ok {
			return false
		}
		f.forgeFirstEntry(ctx, id, th, s.claim.Seq)
	}
	return true
}

// forgeFirstEntry writes the first-post entry of a new id on th naming
// seq, the thread's claim marker (no post of it), then posts the id, as a
// client would, and posts it again raw, past the post's id key, as a
// forger or a poster from before the key could: the post must be answered
// once, and the repost never taken.
func (f *forger) forgeFirstEntry(ctx context.Context, id int, th string, seq uint64) {
	pid := fmt.Sprintf("X%06d", f.h.posts.next.Add(1))
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := f.js.Publish(pctx, "$KV."+natsstore.DefaultFirstPostBucket+"."+th+"."+pid, strconv.AppendUint(nil, seq, 10)); err != nil {
		f.stats.add("unknown:"+string(kindFirstEntry), 1)
		return
	}
	if _, ok := f.h.post(f.s, th, pid, "hello "+pid); !ok {
		return
	}
	data, err := proto.Marshal(&eventspb.Event{Thread: th, Body: &eventspb.Event_MessagePosted{
		MessagePosted: &eventspb.MessagePosted{MessageId: pid, Author: "forger", Text: "hello " + pid}}})
	if err != nil {
		f.h.t.Errorf("forger: %v", err)
		return
	}
	m := nats.NewMsg(f.s.Subjects().Thread(th, events.KindPosted))
	m.Header.Set(events.HeaderType, string(events.TypeMessagePosted))
	m.Data = data
	ack, err := f.js.PublishMsg(pctx, m)
	if err != nil {
		f.stats.add("unknown:"+string(kindFirstEntry), 1)
		return
	}
	f.record(forgedEvent{id: id, kind: kindFirstEntry, thread: th, typ: events.TypeMessagePosted, seq: ack.Sequence}, nil)
}

// forgeAimed forges a run_started consuming post seq on th at once,
// under th's claim as the forger knows it: it may land between the
// holder's read of the post and the holder's own fenced consuming write.
func (f *forger) forgeAimed(ctx context.Context, th string, seq uint64) {
	f.mu.Lock()
	s, ok := f.snapLocked(th)
	f.mu.Unlock()
	if !ok || !s.held() {
		f.stats.add("skipped:aimed", 1)
		return
	}
	id := int(f.ids.Add(1))
	k := kindStartIdle
	if s.active != nil {
		k = kindStartActive
	}
	c := events.Claim{Thread: th, Seq: s.claim.Seq, Holder: s.claim.Holder}
	f.appendFenced(ctx, id, k, events.NewRunStarted(c, time.Now(), fmt.Sprintf("forged-%d", id), seq, "forger"), c, true)
}

// record notes a forged event that landed, or may have: one whose outcome
// is unknown is found in the log by its message id.
func (f *forger) record(r forgedEvent, err error) bool {
	switch {
	case err == nil:
		f.stats.add("stored:"+string(r.kind), 1)
	case errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrConflict):
		f.stats.add("refused:"+string(r.kind), 1)
		return false
	case errors.Is(err, events.ErrInvalidEvent):
		// Refused before any I/O: the forger used a check the layout does
		// not take (under RUNFENCE an unguarded fence, say). A forger bug.
		f.h.t.Errorf("forger: %s %s on %s: %v", r.kind, r.typ, r.thread, err)
		return false
	default:
		f.stats.add("unknown:"+string(r.kind), 1)
	}
	r.acked = err == nil
	f.mu.Lock()
	f.recs = append(f.recs, r)
	f.mu.Unlock()
	return err == nil
}

func (f *forger) msgID(th string) string { return fmt.Sprintf("forger:%s:%d", th, f.n.Add(1)) }

// appendFenced appends ev fenced by c, as the holder would. Under the
// RUNFENCE layout the fence is a compare-and-set on the run subject
// (events.FencedGuarded): the forger reads the run subject's last sequence
// and expects it, as a holder that had just read the thread would, so the
// forgery lands unless some write landed on the run subject since.
func (f *forger) appendFenced(ctx context.Context, id int, k forgeKind, ev *eventspb.Event, c events.Claim, aimed bool) {
	chk := events.Fenced(c)
	if f.s.Subjects().RunFence {
		last, err := f.s.LastSeq(ctx, ev.GetThread(), events.KindRun)
		if err != nil {
			f.stats.add("error:"+string(k), 1)
			return
		}
		chk = events.FencedGuarded(c, last)
	}
	mid := f.msgID(ev.GetThread())
	ack, err := f.s.Append(ctx, ev, chk, events.WithMsgID(mid))
	f.record(forgedEvent{id: id, kind: k, thread: ev.GetThread(), typ: events.TypeOf(ev), seq: ack.Seq, msgID: mid, msg: consumer(ev), aimed: aimed}, err)
}

// appendLast appends ev with a compare-and-set on its subject's last
// sequence, read anew after a conflict, as a runner's run-subject writes
// and claims are made. Its subject is the one the layout stores its type
// on (Subjects.KindOf): a claim marker's is the run subject under
// RUNFENCE.
func (f *forger) appendLast(ctx context.Context, id int, k forgeKind, ev *eventspb.Event, aimed bool) (uint64, bool) {
	kind := f.s.Subjects().KindOf(events.TypeOf(ev))
	for range 5 {
		last, err := f.s.LastSeq(ctx, ev.GetThread(), kind)
		if err != nil {
			f.stats.add("error:"+string(k), 1)
			return 0, false
		}
		mid := f.msgID(ev.GetThread())
		ack, err := f.s.Append(ctx, ev, events.ExpectLast(last), events.WithMsgID(mid))
		if errors.Is(err, events.ErrConflict) {
			continue
		}
		r := forgedEvent{id: id, kind: k, thread: ev.GetThread(), typ: events.TypeOf(ev), seq: ack.Seq, msgID: mid, aimed: aimed}
		return ack.Seq, f.record(r, err)
	}
	f.stats.add("refused:"+string(k), 1)
	return 0, false
}

// forgeLease writes a lease of no session, expiring in 2100, straight to
// the thread's key of the lease bucket, then posts to the thread: runners
// must reclaim the lease after the stores' UnexplainedLeaseTTL and
// consume the post.
func (f *forger) forgeLease(ctx context.Context, id int, th string) {
	data, err := proto.Marshal(&eventspb.Lease{Holder: fmt.Sprintf("forger/%d", id),
		ExpiresUnixNano: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), TtlMs: 10_000})
	if err != nil {
		f.h.t.Errorf("forger: %v", err)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ack, err := f.js.Publish(pctx, "$KV."+natsstore.DefaultBucket+"."+th, data)
	cancel()
	if err != nil {
		f.stats.add("unknown:"+string(kindLease), 1)
		return
	}
	r := forgedEvent{id: id, kind: kindLease, thread: th, seq: ack.Sequence}
	pid := fmt.Sprintf("L%06d", f.h.posts.next.Add(1))
	if pa, ok := f.h.post(f.s, th, pid, "hello "+pid); ok {
		f.h.stats.add("post:after_forged_lease", 1)
		r.msg = pa.Seq
	}
	f.record(r, nil)
}

// forgeries returns the forged events, their sequences resolved from envs
// by message id, and the forged sequences of envs.
func (f *forger) forgeries(envs []events.Envelope) ([]forgedEvent, map[uint64]forgedEvent) {
	f.mu.Lock()
	recs := append([]forgedEvent(nil), f.recs...)
	f.mu.Unlock()
	byID := map[string]int{}
	for i, r := range recs {
		if r.msgID != "" {
			byID[r.msgID] = i
		}
	}
	bySeq := map[uint64]forgedEvent{}
	var kept []forgedEvent
	for _, e := range envs {
		if i, ok := byID[e.MsgID]; ok && e.Type != events.TypeMessagePosted {
			recs[i].seq = e.Seq
			bySeq[e.Seq] = recs[i]
			delete(byID, e.MsgID)
		} else if strings.HasPrefix(e.MsgID, "forger:") {
			f.h.t.Errorf("forger: %s at %d has a forger's message id %s it did not record", e.Type, e.Seq, e.MsgID)
		}
	}
	for _, r := range recs {
		switch {
		case r.kind == kindLease:
			kept = append(kept, r)
		case r.kind == kindFirstEntry: // a raw repost: its sequence is its ack's
			kept = append(kept, r)
			bySeq[r.seq] = r
		case r.seq != 0 && bySeq[r.seq].msgID == r.msgID:
			kept = append(kept, r)
		case r.acked:
			f.h.t.Errorf("forger: %s %s on %s acked at %d (msg id %s) is not in the log", r.kind, r.typ, r.thread, r.seq, r.msgID)
		}
	}
	return kept, bySeq
}
