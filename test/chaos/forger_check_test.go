package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/spec"
)

// TestChaos_forger: the soak's faults on 3 runners and 14 threads, plus a
// writer with runner credentials that stores each forgery of issue 23's
// table with the checks a runner would use. After the drain: each
// forgery is named by the plain audit and each kind by the spec's trace
// validation; no violation is an honest writer's own (the honest event
// it names follows no forged one), and none is an honest I1 or I3 at
// all; every acked post is consumed exactly once within the bound, but
// for the posts a forged consuming event took; forged leases are
// reclaimed. Spec: I1_ConsumedAtMostOnce, I3_OneActiveRun.
func TestChaos_forger(t *testing.T) {
	runForger(t, forgerConfig(t))
}

// TestChaos_forgerRunFence: TestChaos_forger in the RUNFENCE layout
// (natsstore.FenceRun, issue 23): claim markers and releases on the run
// subject, every holder write one compare-and-set on it. The forger reads
// the run subject's last sequence and stores its fenced forgeries with
// events.FencedGuarded, its forged claims on the run subject; the audits
// take the layout from the markers. The holder's window is closed in this
// layout, so an honest write in it fails the test, as with the guard;
// CHAOS_FORGER_AIM aims at it. Spec: I1_ConsumedAtMostOnce,
// I3_OneActiveRun.
func TestChaos_forgerRunFence(t *testing.T) {
	cfg := forgerConfig(t)
	cfg.name = "forger-runfence"
	cfg.fence = natsstore.FenceRun
	runForger(t, cfg)
}

func runForger(t *testing.T, cfg config) {
	h := setup(t, cfg)
	f, stopForger := h.startForger()
	t.Cleanup(stopForger) // before the servers stop: cleanups run last first
	stopPosters := h.startPosters()
	h.runFaults()
	h.faultsOn.Store(false)
	stopForger()
	stopPosters()
	drained := h.drain()
	for _, err := range h.stopAll(30 * time.Second) {
		if err != nil {
			t.Errorf("stop after the drain: %v", err)
		}
	}
	envs := h.readLog()
	recs, forged := f.forgeries(envs)
	h.forged = forged
	rep := audit.NewWithOptions(audit.Options{Subjects: h.subjects(), MaxFindings: -1})
	for _, e := range envs {
		rep.Add(e)
	}
	r := rep.Report()
	h.summary(envs, r, drained)
	t.Logf("forger: %s; aim=%.2f", f.stats.list(""), f.cfg.aim)

	h.checkLayout(envs)
	h.checkReleases(envs)
	h.checkForgeries(envs, r, specTrace(envs, h.subjects()), recs)
	h.checkLeases(envs, recs)
	h.checkFirstEntries(envs, recs)
	checkOneVerdict(t, envs, h.subjects(), cfg.seed)
	for _, v := range h.checkViews(envs, 20) {
		t.Errorf("a holder's view differs from the log (seed %d): %s", cfg.seed, v)
	}
	for _, p := range h.checkConsumed(envs, 30) {
		t.Errorf("consumed exactly once: %s", p)
	}
	slowest, _, late := h.consumedLate(envs, h.calm)
	t.Logf("forger: slowest honest consumption after its thread was free to take it: %s; bound %s", slowest.Round(time.Millisecond), h.bound())
	if len(late) > 0 {
		state := strings.Join(late[:min(len(late), 20)], " ")
		t.Errorf("%d messages consumed past the bound %s (seed %d): %s\ntrails:\n%s", len(late), h.bound(), cfg.seed, state, h.trails(state, 3))
	}
	if h.faults.sum("stall:") == 0 || h.faults.get("kill") == 0 {
		t.Errorf("the faults did too little: stalls=%d kills=%d", h.faults.sum("stall:"), h.faults.get("kill"))
	}
}

// checkForgeries holds the audits to the forgeries. A violation names a
// forgery when one of its seqs is a forged event: the forged event itself
// is the offender, or an honest event that the forgery made wrong (the
// honest end of a run a forged end ended, the honest abandon of a forged
// start under its own claim). An honest I1 or I3, or an honest offender
// naming no forgery, fails the test.
func (h *harness) checkForgeries(envs []events.Envelope, rep audit.Report, sr spec.TraceReport, recs []forgedEvent) {
	t := h.t
	seed := h.cfg.seed
	forged := h.forged
	named := map[int]uint64{} // forgery -> the first violation's offending event naming it
	var consequences, gaps int
	// Issue 23's window: a forged consumption that lands between the
	// holder's read and its own fenced consuming write (inWindow). Without
	// the guard (natsstore.GuardMode) that write carries the claim fence
	// but not the run subject's check, and then makes an I1, an I3, a skip
	// or a give to a run no longer active: the known gap. With the guard,
	// the write is refused instead, so an honest write in the window fails
	// the test.
	guarded := h.guarded.Load()
	gapBy := map[uint64]bool{} // forged consumers that made a gap
	threads := byThread(envs)
	for _, v := range rep.Violations {
		last := v.Seqs[len(v.Seqs)-1]
		var ids []int
		for _, s := range v.Seqs {
			if fe, ok := forged[s]; ok {
				ids = append(ids, fe.id)
			}
		}
		for _, id := range ids {
			if _, ok := named[id]; !ok {
				named[id] = last
			}
		}
		if _, ok := forged[last]; ok {
			continue
		}
		gapSeq, gap := inWindow(threads[v.Thread], last, forged)
		if gap {
			gapBy[gapSeq] = true
		}
		switch {
		case gap && guarded:
			t.Errorf("seed %d: guarded, yet an honest %s on %s at %v follows forged %s at %d in the holder's window (aimed %v): %s\n%s",
				seed, v.Check, v.Thread, v.Seqs, forged[gapSeq].typ, gapSeq, forged[gapSeq].aimed, v.Message, strings.Join(around(envs, v.Thread, last, 12), "\n"))
		case gap:
			// Logged, not failed: without the guard the gap is open (issue 23), and the aimed
			// forger (CHAOS_FORGER_AIM) shows it on purpose. Any other
			// honest violation still fails.
			gaps++
			t.Logf("KNOWN GAP (issue 23), seed %d: honest %s on %s at %v after forged %s at %d (aimed %v): %s\n%s",
				seed, v.Check, v.Thread, v.Seqs, forged[gapSeq].typ, gapSeq, forged[gapSeq].aimed, v.Message, strings.Join(around(envs, v.Thread, last, 12), "\n"))
		case v.Check == audit.CheckI1 || v.Check == audit.CheckI3:
			t.Errorf("seed %d: an honest writer's %s on %s at %v: %s\n%s", seed, v.Check, v.Thread, v.Seqs, v.Message, strings.Join(around(envs, v.Thread, last, 12), "\n"))
		case len(ids) == 0:
			t.Errorf("seed %d: an honest writer's %s on %s at %v names no forgery: %s\n%s", seed, v.Check, v.Thread, v.Seqs, v.Message, strings.Join(around(envs, v.Thread, last, 12), "\n"))
		default:
			consequences++
			if consequences <= 3 {
				t.Logf("a forgery's consequence: %s on %s at %v: %s", v.Check, v.Thread, v.Seqs, v.Message)
			}
		}
	}
	for _, a := range rep.Anomalies {
		if fe, ok := forged[a.Seq]; ok {
			if _, ok := named[fe.id]; !ok {
				named[fe.id] = a.Seq
			}
		}
	}
	// The spec judges each thread up to its first nonconforming event,
	// with the plain audit's verdicts: a forgery the plain audit names
	// there must be its first.
	first := map[string]uint64{}
	for _, n := range sr.Nonconforming {
		first[n.Thread] = n.Seq
	}
	byThread := byThread(envs)
	type tally struct{ forgeries, named, unseen, specJudged, specNamed int }
	kinds := map[forgeKind]*tally{}
	seen := map[int]bool{}
	var missed []string
	for _, r := range recs {
		if r.kind == kindLease || r.kind == kindFirstEntry || seen[r.id] {
			continue // checked apart: checkLeases, checkFirstEntries
		}
		seen[r.id] = true
		k := kinds[r.kind]
		if k == nil {
			k = &tally{}
			kinds[r.kind] = k
		}
		k.forgeries++
		at, ok := named[r.id]
		switch {
		case ok:
			k.named++
		case unseen(byThread[r.thread], r, forged):
			// It follows the protocol under the holder's claim, and that
			// holder wrote nothing after it: the log is one an honest
			// runner that died could have written (audit doc, "What an
			// audit cannot catch").
			k.unseen++
			if k.unseen == 1 && testing.Verbose() {
				t.Logf("unseen: %s %s on %s at %d:\n%s", r.kind, r.typ, r.thread, r.seq, strings.Join(around(envs, r.thread, r.seq+30, 40), "\n"))
			}
			continue
		default:
			missed = append(missed, fmt.Sprintf("%s %s on %s at %d (aimed %v)", r.kind, r.typ, r.thread, r.seq, r.aimed))
			if len(missed) <= 3 {
				t.Logf("named by no violation or anomaly: %s %s on %s at %d:\n%s", r.kind, r.typ, r.thread, r.seq, strings.Join(around(envs, r.thread, r.seq+30, 40), "\n"))
			}
			continue
		}
		f, flagged := first[r.thread]
		switch {
		case !flagged:
			t.Errorf("seed %d: the spec passes %s, where the plain audit names forged %s %s at %d (at %d)", seed, r.thread, r.kind, r.typ, r.seq, at)
		case f == at:
			k.specJudged++
			k.specNamed++
		case f > at:
			k.specJudged++
			t.Errorf("seed %d: the spec's first nonconforming event on %s is %d, after %d where the plain audit names forged %s %s at %d", seed, r.thread, f, at, r.kind, r.typ, r.seq)
		}
	}
	for _, kind := range forgeKinds {
		k := kinds[kind]
		if kind == kindLease || kind == kindFirstEntry {
			continue
		}
		if k == nil {
			t.Errorf("seed %d: the forger stored no %s", seed, kind)
			continue
		}
		t.Logf("forged %-26s forgeries=%d named by the audit=%d unseen=%d judged by the spec=%d named by the spec=%d", kind, k.forgeries, k.named, k.unseen, k.specJudged, k.specNamed)
		switch {
		case k.named == 0 && k.unseen > 0:
			// Each was accounted for as unseen (the holder wrote nothing
			// after it); how many are depends on the faults, so a run may
			// have no named one.
			t.Logf("seed %d: no %s forgery is named by the plain audit; all %d were unseen", seed, kind, k.unseen)
		case k.named == 0:
			t.Errorf("seed %d: no %s forgery is named by the plain audit", seed, kind)
		}
		if k.specJudged > 0 && k.specNamed == 0 {
			t.Errorf("seed %d: no %s forgery is named by the spec's trace validation", seed, kind)
		}
	}
	if len(missed) > 0 {
		t.Errorf("seed %d: %d forgeries named by no violation or anomaly: %s", seed, len(missed), strings.Join(missed[:min(len(missed), 20)], "; "))
	}
	t.Logf("forger: guarded=%v; %d forged events; %d honest violations were a forgery's consequence; %d honest violations from the known gap (%d forged consumptions in the holder's window)", guarded, len(forged), consequences, gaps, len(gapBy))
}

// unseen reports whether r, a forged event of thread envs, is one no audit
// can tell from an honest write:
//   - the end of the active run under its holder's claim, for which no
//     honest event after it names that run: the holder's own end was
//     refused (the run subject had moved) or never came, so the run ended
//     once, as an honest holder's run does;
//   - or either that, or a fenced run_started taking the oldest pending
//     post, after which that holder wrote nothing under that claim.
func unseen(envs []events.Envelope, r forgedEvent, forged map[uint64]forgedEvent) bool {
	if r.kind != kindSecondEnd && r.kind != kindStartIdle {
		return false
	}
	var claim uint64
	var holder, run string
	wrote, named := false, false
	for _, e := range envs {
		switch {
		case e.Seq == r.seq:
			claim, holder = e.Event.GetClaimSeq(), e.Event.GetHolder()
			run = e.Event.GetRunCompleted().GetRunId()
		case e.Seq < r.seq || isForged(forged, e.Seq):
		default:
			wrote = wrote || e.Event.GetClaimSeq() == claim && e.Event.GetHolder() == holder && holder != ""
			named = named || run != "" && runOf(e.Event) == run
		}
	}
	if claim == 0 {
		return false
	}
	return !wrote || r.kind == kindSecondEnd && run != "" && !named
}

// runOf is the run ev writes for, "" for events of no run. An abandon is
// not one: a new claimant may abandon a run whose end it had not yet read,
// which is no violation.
func runOf(ev *eventspb.Event) string {
	type runEvent interface{ GetRunId() string }
	for _, b := range []runEvent{ev.GetRunOutput(), ev.GetRequestOpened(), ev.GetAnswerGiven(), ev.GetSteeringGiven(),
		ev.GetRunInterrupted(), ev.GetRunCompleted(), ev.GetRunFailed()} {
		if id := b.GetRunId(); id != "" {
			return id
		}
	}
	return ""
}

// inWindow returns the forged consuming event that the honest consuming
// write at seq of thread envs did not see: the newest forged
// run_started, answer_given or steering_given under the same claim before
// it, with no honest event of that claim between them, so the holder
// planned its write from a read older than the forgery.
func inWindow(envs []events.Envelope, seq uint64, forged map[uint64]forgedEvent) (uint64, bool) {
	i := slices.IndexFunc(envs, func(e events.Envelope) bool { return e.Seq == seq })
	if i < 0 || envs[i].Event == nil || !consumes(envs[i].Type) {
		return 0, false
	}
	claim := envs[i].Event.GetClaimSeq()
	for j := i - 1; j >= 0; j-- {
		e := envs[j]
		if e.Event == nil || e.Event.GetClaimSeq() != claim || e.Kind != events.KindRun {
			continue
		}
		if !isForged(forged, e.Seq) {
			return 0, false // the holder wrote since: it had read further
		}
		if consumes(e.Type) {
			return e.Seq, true
		}
	}
	return 0, false
}

func consumes(t events.Type) bool {
	return t == events.TypeRunStarted || t == events.TypeAnswerGiven || t == events.TypeSteeringGiven
}

// heldThrough returns "" when the post after the forged lease r, stored at
// stored, was taken by a run under a claim stored before the lease: that
// holder served the thread through. Else it says why not.
func heldThrough(envs []events.Envelope, r forgedEvent, stored time.Time) string {
	if r.msg == 0 {
		return "the post after it was not acknowledged"
	}
	markers := map[uint64]events.Envelope{}
	for _, e := range envs {
		if e.Thread != r.thread || e.Event == nil {
			continue
		}
		if e.Type.Marker() {
			markers[e.Seq] = e
		}
		if consumer(e.Event) != r.msg {
			continue
		}
		c, ok := markers[e.Event.GetClaimSeq()]
		switch {
		case !ok:
			return fmt.Sprintf("the post after it at %d was taken at %d under no claim marker before it", r.msg, e.Seq)
		case !c.Stored.Before(stored):
			return fmt.Sprintf("the post after it at %d was taken at %d under a claim stored at %s, after the lease at %s",
				r.msg, e.Seq, c.Stored.UTC().Format(time.RFC3339Nano), stored.UTC().Format(time.RFC3339Nano))
		}
		return ""
	}
	return fmt.Sprintf("the post after it at %d was never taken", r.msg)
}

func isForged(forged map[uint64]forgedEvent, seq uint64) bool {
	_, ok := forged[seq]
	return ok
}

// checkLeases checks that each forged lease was taken by a runner (a later
// write on its key of the lease bucket), or starved nothing: its thread's
// holder, claimed before the lease was written, took the post after it, so
// no runner had cause to take the thread since.
func (h *harness) checkLeases(envs []events.Envelope, recs []forgedEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(h.adminNC)
	if err != nil {
		h.t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+natsstore.DefaultBucket)
	if err != nil {
		h.t.Fatal(err)
	}
	n, held := 0, 0
	for _, r := range recs {
		if r.kind != kindLease {
			continue
		}
		n++
		m, err := st.GetLastMsgForSubject(ctx, "$KV."+natsstore.DefaultBucket+"."+r.thread)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			h.t.Errorf("forged lease on %s at %d: its key is gone", r.thread, r.seq)
		case err != nil:
			h.t.Errorf("forged lease on %s: %v", r.thread, err)
		case m.Sequence > r.seq:
		default:
			lm, err := st.GetMsg(ctx, r.seq)
			if err != nil {
				h.t.Errorf("forged lease on %s: %v", r.thread, err)
				continue
			}
			if why := heldThrough(envs, r, lm.Time); why != "" {
				h.t.Errorf("seed %d: the forged lease on %s (bucket seq %d) is still the key's last value: no runner reclaimed it, and %s", h.cfg.seed, r.thread, r.seq, why)
			} else {
				held++
			}
		}
	}
	h.statsMu.Lock()
	reclaimed := h.runStats.LeasesReclaimed
	h.statsMu.Unlock()
	h.t.Logf("forger: %d forged leases, %d of them over a holder that served the thread through; runners reclaimed %d leases no session explained", n, held, reclaimed)
	if n == 0 {
		h.t.Errorf("seed %d: the forger stored no lease", h.cfg.seed)
	} else if reclaimed == 0 {
		h.t.Errorf("seed %d: %d forged leases, and no runner reclaimed one", h.cfg.seed, n)
	}
}

// checkFirstEntries holds the runners to the forged first-post entries
// (kindFirstEntry): each repost is no message in the fold, and no runner
// consumed it (a forged consumer may: the aimed forger takes fresh posts); the post it repeats was answered once (checkConsumed). An
// entry a forger wrote first makes the runner remember the id itself.
func (h *harness) checkFirstEntries(envs []events.Envelope, recs []forgedEvent) {
	t := h.t
	folds := map[string]*projections.Thread{}
	threads := byThread(envs)
	n := 0
	for _, r := range recs {
		if r.kind != kindFirstEntry {
			continue
		}
		n++
		v := folds[r.thread]
		if v == nil {
			v = projections.Fold(r.thread, threads[r.thread])
			folds[r.thread] = v
		}
		if _, ok := v.Reposts[r.seq]; !ok {
			t.Errorf("seed %d: the raw repost at %d on %s is not a repost in the fold", h.cfg.seed, r.seq, r.thread)
		}
		for _, e := range threads[r.thread] {
			// A forged consumer may take it (the aimed forger takes
			// every fresh post, the raw repost too): only runners must not.
			if e.Event != nil && consumer(e.Event) == r.seq && !h.isForged(e.Seq) {
				t.Errorf("seed %d: %s at %d on %s consumed the repost at %d:\n%s", h.cfg.seed, e.Type, e.Seq, r.thread, r.seq, strings.Join(around(envs, r.thread, e.Seq, 12), "\n"))
			}
		}
	}
	if n == 0 {
		t.Errorf("seed %d: the forger stored no %s", h.cfg.seed, kindFirstEntry)
	}
	t.Logf("forged %-26s forgeries=%d: each repost untaken", kindFirstEntry, n)
}

// heldThrough accepts a forged lease left as the key's last value only
// when a claim stored before it took the post after it.
func TestHeldThrough(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := events.Claim{Thread: "t", Holder: "r0", Seq: 2}
	claimed := func(seq uint64, at time.Time) events.Envelope {
		return events.Envelope{Seq: seq, Thread: "t", Type: events.TypeThreadClaimed, Stored: at,
			Event: &eventspb.Event{Thread: "t", Holder: "r0", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{}}}}
	}
	started := func(seq uint64, claim, prompt uint64) events.Envelope {
		c := c
		c.Seq = claim
		return events.Envelope{Seq: seq, Thread: "t", Type: events.TypeRunStarted, Event: events.NewRunStarted(c, t0, "r", prompt, "a")}
	}
	lease := forgedEvent{kind: kindLease, thread: "t", msg: 3}
	stored := t0.Add(time.Second)
	for _, tc := range []struct {
		name  string
		envs  []events.Envelope
		lease forgedEvent
		ok    bool
	}{
		{"claimed before, took it", []events.Envelope{claimed(2, t0), started(4, 2, 3)}, lease, true},
		{"claimed after", []events.Envelope{claimed(2, t0), claimed(5, stored.Add(time.Millisecond)), started(6, 5, 3)}, lease, false},
		{"never taken", []events.Envelope{claimed(2, t0), started(4, 2, 1)}, lease, false},
		{"no claim marker", []events.Envelope{started(4, 2, 3)}, lease, false},
		{"post not acknowledged", []events.Envelope{claimed(2, t0), started(4, 2, 3)}, forgedEvent{kind: kindLease, thread: "t"}, false},
	} {
		why := heldThrough(tc.envs, tc.lease, stored)
		if (why == "") != tc.ok {
			t.Errorf("%s: heldThrough = %q, want ok=%v", tc.name, why, tc.ok)
		}
	}
}
