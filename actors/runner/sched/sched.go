package sched

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/artifactr/artifactr/events"
)

// Want is what to do about a thread that may have work. A stronger want
// replaces a weaker one for a thread already queued.
type Want uint8

const (
	// WantPeek reads the thread and claims it only if it has work: a
	// look again without evidence of work must cost no writes.
	WantPeek Want = iota
	// WantProbe claims the thread and gives it up at once if it has
	// nothing to do: a lapsed session's thread, whose lease must be
	// cleared.
	WantProbe
	// WantClaim claims the thread and keeps it until it is idle: a post.
	WantClaim
)

func (w Want) String() string {
	return [...]string{"peek", "probe", "claim"}[w]
}

// OrphanRecheck, in claim TTLs, is how long a runner waits before it claims
// a lapsed session's thread that fell to another runner and is still under
// the lapsed session.
const OrphanRecheck = 2

// HandoverDelay is how long a thread whose actor panicked waits before it
// is claimed again, so a panic that repeats does not spin.
const HandoverDelay = time.Second

// ClaimRetryDelay is how long a claim that failed with an error other than
// busy waits before it is tried again; it doubles with each failure in a
// row, up to MaxClaimRetry.
const ClaimRetryDelay = 250 * time.Millisecond

// MaxClaimRetry is the longest pause before a failed claim is tried again:
// 32 times ClaimRetryDelay, as an overloaded server needs room.
const MaxClaimRetry = ClaimRetryDelay << 5

// Config configures a [Scheduler].
type Config struct {
	// ClaimTTL is the TTL of the runner's session; rechecks wait two.
	ClaimTTL time.Duration
	// MaxClaiming bounds the claims and peeks in flight at once.
	MaxClaiming int
	// Work says a shared work source hands posts to the runners; without
	// one, a post falls to one runner by hash.
	Work bool
	// Owns, when set, says whether this runner may claim thread: with
	// partitions, whether it owns the thread's partition (owner.Core). It
	// replaces the hash over the live sessions (owns), and nothing is
	// queued, claimed or parked for a thread it does not own: the owner
	// of its partition follows it. After it changes to own fewer threads,
	// feed [Disowned]. Nil: every thread may be claimed.
	Owns func(thread string) bool
	// Seed seeds the jitter of timers, so that a test can fix it.
	Seed uint64
	// Logger logs what the scheduler decides that an operator should see.
	Logger *slog.Logger
}

// Stats counts what the scheduler decided.
type Stats struct {
	Claims          int64 // claims that became thread actors
	Held            int64 // thread actors held now
	Panics          int64 // thread actors that stopped without giving their claim up
	ClaimsBusy      int64 // claims refused because another held the thread
	Rechecks        int64 // looks again at a thread after a while
	RechecksDue     int64 // looks again waiting for their time
	Peeks           int64 // reads of a thread to see whether it has work
	LiveSessions    int64 // live sessions the lease watch knows of
	KeptParked      int64 // wake-ups that stayed parked past a claim or read in flight
	LeasesReclaimed int64 // claims that took a lease no live session explained
}

// child is a thread actor as the scheduler knows it.
type child struct {
	claim    events.Claim
	lastPost uint64 // the newest post routed to it
}

// claiming is a claim in flight, with the events the follow routed for its
// thread meanwhile: the claim's load may have been made before them.
type claiming struct {
	want Want
	envs []events.Envelope
	// acks is how many of the thread's parked wake-ups came before the
	// claim or peek started: their posts were stored before its marker
	// (or its read), so it reads them. Wake-ups that came later may be for
	// posts it never read, and stay parked.
	acks int
	// then is work asked for while a peek was in flight, to be done after
	// it; thenSet says there is some.
	then    Want
	thenSet bool
}

type workItem struct {
	thread string
	want   Want
}

// Scheduler decides which threads a runner claims, peeks and looks at
// again, when it acknowledges a wake-up and when it retries. It does no
// I/O and reads no clock: each [Input] carries the time, and each
// [Ready] says what to do. It is not safe for concurrent use; one loop
// owns it.
type Scheduler struct {
	cfg Config
	rng *rand.Rand
	rd  Ready // the Ready being built
	now time.Time

	children map[string]*child
	claiming map[string]*claiming
	queue    []workItem      // waiting for a claim slot or a session
	queued   map[string]Want // threads in queue, and what for
	failures map[string]int  // claims in a row that failed, by thread
	rechecks map[string]bool // threads with a recheck timer pending
	// acks are the work source's wake-ups for threads not yet held, to
	// acknowledge once a claim holds them.
	acks map[string][]func()
	// skipped are the threads whose posts this runner left to another
	// live runner's claim. Their release makes this runner read them once,
	// later: the holder may have died between its release and the claim
	// again it would make for a post that came as it released.
	skipped  map[string]struct{}
	draining bool
	session  events.Session // claims are made under it; ID "" while lost
	spawning bool           // a Spawn awaits its Spawned

	// What the lease watch says: the session each leased thread lives by,
	// and the sessions whose keys are present.
	leases   map[string]string
	sessions map[string]bool
	caughtUp bool

	timers timerHeap
	stats  Stats
}

// New returns a scheduler for a runner that holds session (ID "" when it
// has none yet).
func New(cfg Config, session events.Session) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Scheduler{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		children: map[string]*child{},
		claiming: map[string]*claiming{},
		queued:   map[string]Want{},
		failures: map[string]int{},
		rechecks: map[string]bool{},
		skipped:  map[string]struct{}{},
		acks:     map[string][]func(){},
		session:  session,
		leases:   map[string]string{},
		sessions: map[string]bool{},
	}
}

// Stats returns the scheduler's counters.
func (s *Scheduler) Stats() Stats {
	st := s.stats
	st.Held = int64(len(s.children))
	st.RechecksDue = int64(len(s.rechecks))
	st.LiveSessions = int64(len(s.sessions))
	return st
}

// Step takes one input and returns what to do about it.
func (s *Scheduler) Step(in Input) Ready {
	s.rd = Ready{}
	s.now = in.Now
	switch ev := in.Event.(type) {
	case Routed:
		s.route(ev.Env)
	case Woken:
		s.woken(ev)
	case LookAt:
		s.enqueue(workItem{thread: ev.Thread, want: WantPeek})
	case PeekDone:
		s.peeked(ev, in.Ended)
	case ClaimDone:
		s.claimed(ev, in.Ended)
	case Spawned:
		s.spawned(ev)
	case Terminated:
		s.terminated(ev, in.Ended)
	case LeaseChanged:
		s.leaseChanged(ev.Update)
	case LeaseWatchReset:
		s.caughtUp = false
	case SessionOpened:
		s.session = ev.Session
	case SessionRenewed:
		if ev.Session.ID == s.session.ID {
			s.session = ev.Session
		}
	case SessionLost:
		s.sessionLost(ev.ID)
	case Drain:
		s.drain()
	case Disowned:
		s.disowned()
	case Tick:
		s.fire()
	default:
		panic(fmt.Sprintf("sched: unknown event %T", in.Event))
	}
	if !s.spawning {
		s.pump()
	}
	s.rd.Done = s.draining && len(s.children) == 0 && len(s.claiming) == 0
	s.rd.Wake = s.timers.next()
	return s.rd
}

func (s *Scheduler) sessionLost(id string) {
	s.session = events.Session{}
	for _, th := range slices.Sorted(maps.Keys(s.children)) {
		if s.children[th].claim.Lease.Session == id {
			s.rd.SessionGone = append(s.rd.SessionGone, th)
		}
	}
}

func (s *Scheduler) drain() {
	s.draining = true
	s.queue, s.queued = nil, map[string]Want{}
	s.acks = map[string][]func(){} // unacknowledged: they go to another runner
	s.rd.Drain = slices.Sorted(maps.Keys(s.children))
}

// mayClaim reports whether the Owns hook lets this runner claim th.
func (s *Scheduler) mayClaim(th string) bool {
	return s.cfg.Owns == nil || s.cfg.Owns(th)
}

// mayQueue reports whether a claim of th may be queued and started: a
// thread this runner may claim, or one whose lease its session holds with
// no claim of it here (a claim that failed after it took the lease). Only
// this runner can free such a lease while its session lives, so it claims
// the thread even when another owns it now; spawned then drains the claim,
// as a handover, which gives the lease up.
func (s *Scheduler) mayQueue(th string) bool {
	if s.mayClaim(th) {
		return true
	}
	sess, ok := s.leases[th]
	return ok && sess != "" && sess == s.session.ID && s.children[th] == nil
}

// disowned hands over the threads Owns no longer gives this runner, as
// drain does for all of them: their queued claims and parked wake-ups are
// dropped (unacknowledged: they go to the new owner) and their actors
// drain. Their claims in flight are drained once spawned (spawned).
func (s *Scheduler) disowned() {
	kept := s.queue[:0]
	for _, w := range s.queue {
		if s.mayQueue(w.thread) {
			kept = append(kept, w)
		} else {
			delete(s.queued, w.thread)
		}
	}
	clear(s.queue[len(kept):])
	s.queue = kept
	for th := range s.acks {
		if !s.mayClaim(th) {
			delete(s.acks, th)
		}
	}
	for _, th := range slices.Sorted(maps.Keys(s.children)) {
		if !s.mayClaim(th) {
			s.rd.Drain = append(s.rd.Drain, th)
		}
	}
}

// Holds reports whether a thread that match selects is held or being
// claimed here: a handover of those threads is over once none is.
func (s *Scheduler) Holds(match func(thread string) bool) bool {
	for th := range s.children {
		if match(th) {
			return true
		}
	}
	for th := range s.claiming {
		if match(th) {
			return true
		}
	}
	return false
}

// route hands an event of the stream to its thread's actor, or keeps it for
// a claim in flight. A post to a thread no live runner holds is work for the
// runner it falls to by hash (see owns); the others look again after a while,
// so a post is not lost if that runner is gone.
func (s *Scheduler) route(env events.Envelope) {
	if c := s.children[env.Thread]; c != nil {
		if env.Kind == events.KindPosted {
			c.lastPost = env.Seq
		}
		s.rd.Forward = true
		return
	}
	if cl := s.claiming[env.Thread]; cl != nil {
		cl.envs = append(cl.envs, env)
		return
	}
	if env.Type != events.TypeMessagePosted || env.Thread == "" {
		return // a fork's copied history is no work
	}
	th := env.Thread
	sess, leased := s.leases[th]
	if leased && sess != s.session.ID && s.sessions[sess] {
		// A live runner holds it and sees the post on its own follow.
		// Should its claim be released without it taking the post (it
		// died in between), the release says so (leaseChanged).
		s.skipped[th] = struct{}{}
		return
	}
	if s.cfg.Work && !(leased && sess == s.session.ID) {
		return // the work source hands the post to one runner
	}
	if (leased && sess == s.session.ID) || s.owns(th) {
		// This session's lease with no claim here (a release the watch
		// has not reported yet), or a free thread that falls to this
		// runner: one runner claims it, rather than all racing.
		s.enqueue(workItem{thread: th, want: WantClaim})
	} else {
		// It falls to another runner: look again later, in case that one
		// died before it claimed.
		s.recheck(th)
	}
}

// woken takes a wake-up from the work source. It is acknowledged only once
// this runner has seen the post taken care of: a claim of its own made
// after it (which loads it), or a read after the thread's holder let go
// that finds nothing left to do. Until then it is parked: should this
// runner die, the source hands the post to another. A thread held here or
// by another live runner is read when that claim ends (terminated,
// leaseChanged), since its holder may have released it and died before it
// claimed again for the post.
func (s *Scheduler) woken(w Woken) {
	if s.draining || !s.mayClaim(w.Thread) {
		return // not acknowledged: another runner gets it
	}
	th := w.Thread
	s.acks[th] = append(s.acks[th], w.Ack)
	sess, leased := s.leases[th]
	if s.children[th] != nil || (leased && sess != s.session.ID && s.sessions[sess]) {
		return // parked until that claim ends
	}
	s.enqueue(workItem{thread: th, want: WantClaim})
}

// lookAfterHolder reads th, whose holder let go, if wake-ups for it are
// parked here.
func (s *Scheduler) lookAfterHolder(th string) {
	if len(s.acks[th]) > 0 && s.children[th] == nil && !s.draining {
		s.enqueue(workItem{thread: th, want: WantPeek})
	}
}

// ackRead acknowledges th's wake-ups that came before cl started: a claim
// that read their posts holds the thread, or a read after its holder let go
// found nothing left to do. Later ones stay parked: their posts may have
// landed after cl's read, and if its holder releases the thread without
// them and dies before it claims again, only their redelivery brings the
// thread back (issue 21).
func (s *Scheduler) ackRead(th string, before int) {
	acks := s.acks[th]
	n := min(before, len(acks))
	if kept := len(acks) - n; kept > 0 {
		s.stats.KeptParked += int64(kept)
	}
	if n == 0 {
		return
	}
	if n == len(acks) {
		delete(s.acks, th)
	} else {
		s.acks[th] = slices.Clone(acks[n:])
	}
	s.rd.Acks = append(s.rd.Acks, acks[:n:n]...)
}

func (s *Scheduler) enqueue(w workItem) {
	if cl := s.claiming[w.thread]; cl != nil && cl.want == WantPeek && !s.draining {
		// A peek answers only whether it read work; this must not be lost.
		if !cl.thenSet || w.want > cl.then {
			cl.then, cl.thenSet = w.want, true
		}
		return
	}
	if s.draining || s.children[w.thread] != nil || s.claiming[w.thread] != nil || !s.mayQueue(w.thread) {
		return
	}
	if q, ok := s.queued[w.thread]; ok {
		s.queued[w.thread] = max(q, w.want)
		return
	}
	s.queued[w.thread] = w.want
	s.queue = append(s.queue, w)
}

// pump starts claims from the queue while slots are free. It is called at
// the end of every step: a step that frees no slot and queues nothing
// starts nothing.
func (s *Scheduler) pump() {
	for len(s.queue) > 0 && len(s.claiming) < s.cfg.MaxClaiming && s.session.ID != "" && !s.draining {
		w := s.queue[0]
		s.queue[0] = workItem{}
		s.queue = s.queue[1:]
		wt, ok := s.queued[w.thread]
		delete(s.queued, w.thread)
		if !ok || s.children[w.thread] != nil || s.claiming[w.thread] != nil || !s.mayQueue(w.thread) {
			continue
		}
		s.claiming[w.thread] = &claiming{want: wt, acks: len(s.acks[w.thread])}
		if wt == WantPeek {
			s.rd.Peeks = append(s.rd.Peeks, w.thread)
			continue
		}
		s.rd.Claims = append(s.rd.Claims, Claim{Thread: w.thread, Session: s.session})
	}
	if len(s.queue) == 0 && cap(s.queue) > 1024 {
		s.queue = nil // let a drained burst's backing array go
	}
}

// peeked claims a thread whose peek found work, failed, or was overtaken by
// a post.
func (s *Scheduler) peeked(m PeekDone, ended bool) {
	cl := s.claiming[m.Thread]
	delete(s.claiming, m.Thread)
	s.stats.Peeks++
	if ended {
		return
	}
	if cl != nil && slices.ContainsFunc(cl.envs, func(e events.Envelope) bool { return e.Kind == events.KindPosted }) {
		// Posted while the peek read: it may have read before the post.
		s.enqueue(workItem{thread: m.Thread, want: WantClaim})
		return
	}
	if cl != nil && cl.thenSet && cl.then > WantPeek {
		s.enqueue(workItem{thread: m.Thread, want: cl.then})
	}
	if m.Err != nil || m.Work {
		if m.Err != nil {
			s.cfg.Logger.Debug("peek failed; claiming", "thread", m.Thread, "err", m.Err)
		}
		s.enqueue(workItem{thread: m.Thread, want: WantProbe})
		return
	}
	s.ackRead(m.Thread, acksOf(cl)) // read after its holder let go: nothing left to do
}

func (s *Scheduler) claimed(m ClaimDone, ended bool) {
	cl := s.claiming[m.Thread]
	delete(s.claiming, m.Thread)
	if m.Err != nil {
		if !ended {
			s.claimFailed(m, cl)
		}
		return
	}
	delete(s.failures, m.Thread)
	if why := m.Claim.Lease.Reclaimed; why != "" {
		s.stats.LeasesReclaimed++
		s.cfg.Logger.Warn("claimed a thread whose lease no live session explained", "thread", m.Thread, "reason", why)
	}
	if ended {
		return // killed or stopped: spawn nothing the stop would wait for
	}
	if s.draining || m.Claim.Lease.Session != s.session.ID {
		// Draining, or claimed under a session lost meanwhile: leave the
		// claim as it is. Its lease lapses with the session (closed at the
		// end of a drain), and whoever claims next abandons what it must;
		// releasing here would skip that abandon. Claim it again under
		// the new session: it may have work.
		if !s.draining {
			s.enqueue(workItem{thread: m.Thread, want: wantOf(cl)})
		}
		return
	}
	sp := &Spawn{Thread: m.Thread, Claim: m.Claim, Probe: wantOf(cl) != WantClaim, acks: acksOf(cl)}
	if cl != nil {
		sp.Routed = cl.envs
	}
	s.rd.Spawn = sp
	s.spawning = true
}

// claimFailed looks at a thread again after its claim failed.
func (s *Scheduler) claimFailed(m ClaimDone, cl *claiming) {
	if errors.Is(m.Err, events.ErrThreadBusy) {
		s.stats.ClaimsBusy++
		// Another holds it; the wake-ups stay parked until it lets go.
		// Another holds the lease and sees the thread's posts. Look
		// again later all the same: if nobody holds it by then (its
		// claim failed, its runner died before it retried), the work
		// this runner was woken for would wait for the next post.
		s.recheck(m.Thread)
		return
	}
	// It may have failed half way, with the lease or the marker ours:
	// try again soon, or the thread waits for this runner's end.
	s.recheck(m.Thread)
	n := s.failures[m.Thread]
	s.failures[m.Thread] = n + 1
	delay := min(ClaimRetryDelay<<min(n, 5), MaxClaimRetry)
	s.cfg.Logger.Warn("claim failed; retrying", "thread", m.Thread, "attempt", n+1, "in", delay, "err", m.Err)
	s.arm(Timer{Kind: TimerRetry, Thread: m.Thread, Want: wantOf(cl)}, s.jitter(delay))
}

// spawned holds a thread whose actor started.
func (s *Scheduler) spawned(m Spawned) {
	s.spawning = false
	if m.Err != nil {
		return
	}
	th := m.Spawn.Thread
	s.children[th] = &child{claim: m.Spawn.Claim}
	delete(s.skipped, th)
	s.ackRead(th, m.Spawn.acks)
	s.stats.Claims++
	if !s.mayClaim(th) {
		s.rd.Drain = append(s.rd.Drain, th) // disowned while its claim was in flight
	}
}

// terminated forgets a stopped thread actor and hands its thread over when
// it stopped without giving its claim up: a panic, or its session lost.
func (s *Scheduler) terminated(m Terminated, ended bool) {
	th := m.Thread
	c := s.children[th]
	if c == nil {
		return
	}
	delete(s.children, th)
	defer s.lookAfterHolder(th)
	switch {
	case s.draining || ended:
		// Stopped by the runner's own stop or kill.
	case c.claim.Lease.Session != s.session.ID:
		// Its session was lost: the lease is free; claim again if there is
		// work.
		s.enqueue(workItem{thread: th, want: WantProbe})
	case m.Clean:
		switch {
		case m.Rework || c.lastPost > m.Checked:
			// Work arrived as it released, or a post reached it after
			// its release looked.
			s.enqueue(workItem{thread: th, want: WantClaim})
		case !m.Released:
			s.recheck(th) // fenced out, or in case the lease is still this session's
		}
	default:
		s.stats.Panics++
		s.cfg.Logger.Error("thread actor stopped without giving its claim up; claiming the thread again", "thread", th, "claim_seq", c.claim.Seq)
		// The lease is under this runner's live session, so nobody else
		// would take the thread: claim it again (a fresh claim, a fresh
		// core), after a pause so that a panic that repeats does not spin.
		s.arm(Timer{Kind: TimerHandover, Thread: th}, HandoverDelay)
	}
}

// leaseChanged keeps the lease map and claims the threads of sessions that
// lapsed, which may have work their holder will never do.
func (s *Scheduler) leaseChanged(u events.LeaseUpdate) {
	switch {
	case u.CaughtUp:
		s.caughtUp = true
		for _, th := range slices.Sorted(maps.Keys(s.leases)) {
			if sess := s.leases[th]; sess != "" && !s.sessions[sess] {
				s.orphaned(th, sess)
			}
		}
	case u.Thread != "":
		s.threadLeaseChanged(u)
	case u.Present:
		s.sessions[u.Session] = true
	default:
		delete(s.sessions, u.Session)
		if !s.caughtUp {
			return
		}
		// A session lapsed or closed: its threads are free. One scan of
		// the map on a rare event, rather than an index kept on every
		// claim. In thread order, as the jitter's draws follow it.
		for _, th := range slices.Sorted(maps.Keys(s.leases)) {
			if s.leases[th] == u.Session {
				s.orphaned(th, u.Session)
			}
		}
	}
}

// threadLeaseChanged keeps a thread's lease.
func (s *Scheduler) threadLeaseChanged(u events.LeaseUpdate) {
	if !u.Present || u.Session == "" {
		delete(s.leases, u.Thread)
		s.lookAfterHolder(u.Thread)
		if _, ok := s.skipped[u.Thread]; ok && s.children[u.Thread] == nil {
			// Released after this runner left posts to its holder,
			// which took them or died before it could: read it
			// later, once the holder has had time to claim again.
			delete(s.skipped, u.Thread)
			s.recheck(u.Thread)
		}
		return
	}
	s.leases[u.Thread] = u.Session
	if u.Session == s.session.ID && s.children[u.Thread] == nil && s.claiming[u.Thread] == nil {
		s.recheck(u.Thread) // this session's lease with no claim of it here
	}
	if s.caughtUp && !s.sessions[u.Session] {
		// Written under a session already gone (a claim that was late
		// for its runner's session): nobody will see that session lapse
		// again, so take it up now.
		s.orphaned(u.Thread, u.Session)
	}
}

// orphaned takes up thread th, whose lease lives by the lapsed session
// dead. The live sessions split such threads between them by hash, so that
// each is claimed by one runner rather than raced for by all; the others
// look again after a while, in case the one it fell to is gone too.
func (s *Scheduler) orphaned(th, dead string) {
	if s.owns(th) {
		s.enqueue(workItem{thread: th, want: WantProbe})
		return
	}
	s.arm(Timer{Kind: TimerOrphan, Thread: th, Dead: dead}, s.jitter(OrphanRecheck*s.cfg.ClaimTTL))
}

// recheck looks at th again after two claim TTLs (see rechecked), once
// however many reasons to look came meanwhile: a claim that found it busy or
// failed, a claim that ended, a lease of this session with no claim here.
func (s *Scheduler) recheck(th string) {
	if s.rechecks[th] {
		return
	}
	s.rechecks[th] = true
	s.arm(Timer{Kind: TimerRecheck, Thread: th}, s.jitter(OrphanRecheck*s.cfg.ClaimTTL))
}

// rechecked looks at th again, as recheck asked.
func (s *Scheduler) rechecked(th string) {
	delete(s.rechecks, th)
	s.stats.Rechecks++
	sess, leased := s.leases[th]
	idle := s.children[th] == nil && s.claiming[th] == nil
	switch {
	case leased && sess != s.session.ID && s.sessions[sess]:
		// Another live runner holds it: watch for its release.
		s.skipped[th] = struct{}{}
	case !leased:
		// Nobody holds it: claim it if it has work.
		s.enqueue(workItem{thread: th, want: WantPeek})
	case idle && sess == s.session.ID:
		// This runner's session holds it with no claim on it (a
		// claim that failed after taking the lease, which it keeps
		// for the retry): claim it, which clears the lease if it has
		// nothing to do.
		s.enqueue(workItem{thread: th, want: WantProbe})
	}
}

// owns reports whether this runner's session is the one a free thread, or
// an orphaned lease, falls to: the live session at th's hash among them, in
// id order. While this runner has no session, everything falls to it, to be
// claimed once it has one.
func (s *Scheduler) owns(th string) bool {
	if s.cfg.Owns != nil {
		return s.cfg.Owns(th)
	}
	me := s.session.ID
	if me == "" {
		return true
	}
	live := make([]string, 0, len(s.sessions)+1)
	for sess := range s.sessions {
		live = append(live, sess)
	}
	if !s.sessions[me] {
		live = append(live, me)
	}
	slices.Sort(live)
	h := fnv.New32a()
	h.Write([]byte(th))
	return live[int(h.Sum32())%len(live)] == me
}

// wantOf is what a claim in flight was for; a claim the scheduler no longer
// tracks keeps the thread only if it has work.
func wantOf(cl *claiming) Want {
	if cl == nil {
		return WantProbe
	}
	return cl.want
}

// acksOf is how many parked wake-ups came before cl started.
func acksOf(cl *claiming) int {
	if cl == nil {
		return 0
	}
	return cl.acks
}

// Describe returns, for each of threads, what the scheduler knows of it:
// whether it is queued for a claim, being claimed or held, and the session
// its lease lives by as the lease watch last said. followed is how far the
// runner's follow of the stream got. It is for diagnostics.
func (s *Scheduler) Describe(threads []string, followed uint64) map[string]string {
	out := make(map[string]string, len(threads))
	for _, th := range threads {
		out[th] = fmt.Sprintf("session=%s queue=%d claiming=%d rechecks=%d caughtUp=%v followed=%d: %s",
			s.session.ID, len(s.queue), len(s.claiming), len(s.rechecks), s.caughtUp, followed, strings.Join(s.describe(th), " "))
	}
	return out
}

func (s *Scheduler) describe(th string) []string {
	var parts []string
	if wt, ok := s.queued[th]; ok {
		parts = append(parts, fmt.Sprintf("queued(%v)", wt))
	}
	if cl := s.claiming[th]; cl != nil {
		parts = append(parts, fmt.Sprintf("claiming(%v)", cl.want))
	}
	if c := s.children[th]; c != nil {
		parts = append(parts, fmt.Sprintf("held(claim=%d session=%s)", c.claim.Seq, c.claim.Lease.Session))
	}
	if sess, ok := s.leases[th]; ok {
		parts = append(parts, fmt.Sprintf("lease(session=%s live=%v)", sess, s.sessions[sess]))
	}
	if s.rechecks[th] {
		parts = append(parts, "recheck-due")
	}
	if _, ok := s.skipped[th]; ok {
		parts = append(parts, "skipped")
	}
	if n := s.failures[th]; n > 0 {
		parts = append(parts, fmt.Sprintf("failures=%d", n))
	}
	if n := len(s.acks[th]); n > 0 {
		parts = append(parts, fmt.Sprintf("parked=%d", n))
	}
	return parts
}
