package chaos

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/sys"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// readLog reads the whole log in order, up to each stream's last sequence
// when called, with one ordered consumer per partition (as `artifactr
// audit` does): the partitions one after the other. A thread lives in one
// partition, so each thread's events stay in order.
func (h *harness) readLog() []events.Envelope {
	h.t.Helper()
	var envs []events.Envelope
	for p, stream := range h.streams() {
		envs = append(envs, h.readPartition(p, stream)...)
	}
	return envs
}

// streamInfo reads stream's info with the admin connection, retrying
// through faults; it fails the test when it cannot.
func (h *harness) streamInfo(ctx context.Context, stream string) *jetstream.StreamInfo {
	h.t.Helper()
	var info *jetstream.StreamInfo
	err := h.retry(ctx, func(ctx context.Context) error {
		js, err := jetstream.New(h.adminNC)
		if err != nil {
			return err
		}
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err = st.Info(ctx)
		return err
	})
	if err != nil {
		h.t.Fatalf("read stream %s's info: %v", stream, err)
	}
	return info
}

// readPartition reads partition p's stream up to its last sequence.
func (h *harness) readPartition(p int, stream string) []events.Envelope {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	last := h.streamInfo(ctx, stream).State.LastSeq
	if last == 0 {
		return nil
	}
	tail, err := h.admin.Tail(ctx, h.subjects().PartitionAll(p), 1)
	if err != nil {
		h.t.Fatalf("read the log of %s: %v", stream, err)
	}
	defer tail.Stop()
	envs := make([]events.Envelope, 0, last)
	for {
		env, err := tail.Next(ctx)
		if err != nil {
			h.t.Fatalf("read the log of %s at %d of %d: %v", stream, len(envs), last, err)
		}
		envs = append(envs, env)
		if env.Seq >= last {
			return envs
		}
	}
}

// retry calls f until it succeeds or ctx ends, backing off between calls
// (a cluster may be electing).
func (h *harness) retry(ctx context.Context, f func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(cctx)
		cancel()
		if err == nil || !sys.Sleep(ctx, 200*time.Millisecond) {
			return err
		}
	}
}

// audit runs the spec's invariants over envs (the whole log, in order).
func (h *harness) audit(envs []events.Envelope) audit.Report {
	a := audit.NewWithOptions(audit.Options{Subjects: h.subjects()})
	for _, e := range envs {
		a.Add(e)
	}
	return a.Report()
}

// staleDamage counts the violations only a stale consuming write makes:
// a message consumed twice (I1) or two runs active at once (I3). With the
// fence off, FenceNewestClaim flags every consuming write for its missing
// headers, stale or not; these two need a stale write that landed.
func staleDamage(rep audit.Report) int {
	n := 0
	for _, v := range rep.Violations {
		if v.Check == audit.CheckI1 || v.Check == audit.CheckI3 {
			n++
		}
	}
	return n
}

// byThread groups envs by thread, keeping stream order.
func byThread(envs []events.Envelope) map[string][]events.Envelope {
	m := map[string][]events.Envelope{}
	for _, e := range envs {
		m[e.Thread] = append(m[e.Thread], e)
	}
	return m
}

// bound is the runners' promise (runner.ConsumeBound): once the faults
// stop, a thread free to take its oldest message takes it within the bound.
// It is free from the latest of the end of the faults, the message's post
// and the end (completed or failed) of the run before: a thread's messages
// wait for its runs in turn, which no bound on the runners covers. An
// abandoned run does not count as an end: its holder was dead, and taking
// the thread over is the runners' part.
func (h *harness) bound() time.Duration {
	return runner.ConsumeBound(h.cfg.ttl, natsstore.WorkAckWait)
}

// due is when a message posted at posted must be consumed by, the faults
// having stopped at calm and the thread's run before having ended at ended.
func (h *harness) due(calm, posted, ended time.Time) time.Time {
	return later(later(calm, posted), ended).Add(h.bound())
}

// lastEnd is the stored time of the last run_completed or run_failed of
// envs (one thread's, in order) before seq, zero when none.
func lastEnd(envs []events.Envelope, seq uint64) time.Time {
	var t time.Time
	for _, e := range envs {
		if e.Seq >= seq {
			break
		}
		if e.Type == events.TypeRunCompleted || e.Type == events.TypeRunFailed {
			t = e.Stored
		}
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// settled reports whether every thread has no pending message and no active
// run, and which pending messages are overdue: still pending past h.due,
// the faults having stopped at calm. Threads whose active run waits for an
// answer with nothing pending get one (their asker's answer may be the
// run's last post).
func (h *harness) settled(answered map[string]time.Time, calm time.Time) (ok bool, state string, overdue int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var waiting []string
	// One replay of the whole log per poll, not a load per thread: the
	// many-threads case has thousands.
	all := map[string][]events.Envelope{}
	for p := range h.subjects().PartitionCount() {
		_, err := h.admin.Replay(ctx, h.subjects().PartitionAll(p), 1, func(env events.Envelope) error {
			all[env.Thread] = append(all[env.Thread], env)
			return nil
		})
		if err != nil {
			return false, fmt.Sprintf("replay of partition %d: %v", p, err), 0
		}
	}
	now := time.Now()
	var late []string
	for _, th := range h.threads {
		envs := all[th]
		if len(envs) == 0 {
			continue
		}
		v := projections.Fold(th, envs)
		pending := len(v.Pending())
		if pending == 0 && v.ActiveRun == nil {
			continue
		}
		desc := fmt.Sprintf("%s(pending %d, active %v, holder %s)", th, pending, v.ActiveRun != nil, v.Claim.Holder)
		if m, ok := v.OldestPending(); ok && now.After(h.due(calm, m.Posted, lastEnd(envs, math.MaxUint64))) {
			overdue++
			if len(late) < 20 {
				late = append(late, desc)
			}
		}
		if len(waiting) < 20 {
			waiting = append(waiting, desc)
		} else {
			waiting[19] = "..."
		}
		if pending == 0 && len(v.OpenRequests()) > 0 && time.Since(answered[th]) > 3*h.cfg.ttl {
			answered[th] = time.Now()
			id := fmt.Sprintf("a%06d", h.posts.next.Add(1))
			// Named enqueue: the post answers the asking run whatever the
			// strategy, and a thread whose first post was reject (through
			// the HTTP API, whose default it is) has reject as its own, under
			// which a post that names none may not land while a run is active
			// (RejectOnlyIdle). The raw store post does not check that.
			h.postStrategy(h.poster, th, id, "answer "+id, "enqueue")
			h.stats.add("post:drain_answer", 1)
		}
	}
	if overdue > 0 {
		return false, strings.Join(late, " "), overdue // the overdue ones first, for the trails
	}
	return len(waiting) == 0, strings.Join(waiting, " "), 0
}

// describe asks every live runner where the threads named in state stand.
func (h *harness) describe(state string) string {
	var threads []string
	for _, w := range strings.Fields(state) {
		if th, _, ok := strings.Cut(w, "(pending"); ok {
			threads = append(threads, th)
		}
	}
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, sl := range h.slots {
		sl.mu.Lock()
		r, id, cs := sl.r, sl.id, sl.cs
		sl.mu.Unlock()
		if r == nil {
			continue
		}
		if cs != nil && cs.frozen() {
			fmt.Fprintf(&b, "  %s: frozen (a paused stall's append has not returned)\n", id)
		}
		for th, d := range r.Describe(ctx, threads) {
			fmt.Fprintf(&b, "  %s %s: %s\n", id, th, d)
		}
	}
	return b.String()
}

// trails prints, for the first n threads named in state, their last events
// and their lease key's history, for a drain that failed.
func (h *harness) trails(state string, n int) string {
	var b strings.Builder
	b.WriteString(h.workQueueInfo())
	envs := h.readLog()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var kv jetstream.KeyValue
	if js, err := jetstream.New(h.adminNC); err == nil {
		kv, _ = js.KeyValue(ctx, natsstore.DefaultBucket)
	}
	for _, w := range strings.Fields(state) {
		th, _, ok := strings.Cut(w, "(pending")
		if !ok || n == 0 {
			continue
		}
		n--
		var mine []events.Envelope
		for _, e := range envs {
			if e.Thread == th {
				mine = append(mine, e)
			}
		}
		fmt.Fprintf(&b, "  %s: %d events\n", th, len(mine))
		for _, e := range mine[max(0, len(mine)-14):] {
			detail := ""
			if e.Event != nil {
				switch body := e.Event.GetBody().(type) {
				case *eventspb.Event_ThreadClaimed:
					detail = fmt.Sprintf("holder=%s rev=%d", body.ThreadClaimed.GetHolder(), body.ThreadClaimed.GetLeaseRevision())
				case *eventspb.Event_ThreadReleased:
					detail = fmt.Sprintf("holder=%s reason=%s", body.ThreadReleased.GetHolder(), body.ThreadReleased.GetReason())
				}
			}
			fmt.Fprintf(&b, "    seq=%d %s at %s %s\n", e.Seq, e.Type, e.Stored.Sub(h.start).Round(time.Millisecond), detail)
		}
		b.WriteString(h.wakeTrail(th))
		if kv == nil {
			continue
		}
		hist, err := kv.History(ctx, th)
		if err != nil {
			fmt.Fprintf(&b, "    lease history: %v\n", err)
			continue
		}
		for _, e := range hist[max(0, len(hist)-6):] {
			var l eventspb.Lease
			_ = proto.Unmarshal(e.Value(), &l)
			fmt.Fprintf(&b, "    lease rev=%d %s at %s holder=%s session=%s\n", e.Revision(), e.Operation(), e.Created().Sub(h.start).Round(time.Millisecond), l.GetHolder(), l.GetSession())
		}
	}
	return b.String()
}

// drain waits, with no faults, until every message is consumed and no run
// is active: every runner up, clocks true, the cluster whole.
func (h *harness) drain() time.Duration {
	h.t.Helper()
	start := time.Now()
	h.calm = start
	for _, sl := range h.slots {
		sl.skew.Store(0)
		if !sl.up() {
			sl.startRunner("")
		}
	}
	if c := h.cluster; c != nil {
		for i, n := range c.Nodes {
			if n == nil {
				c.Restart(i)
			}
		}
	}
	answered := map[string]time.Time{}
	deadline := start.Add(h.cfg.drain)
	for {
		ok, state, overdue := h.settled(answered, start)
		if ok {
			return time.Since(start)
		}
		if overdue > 0 {
			dumpStacks(h.t)
			h.t.Fatalf("%s: %d threads with a post pending past the bound (%s after the thread was free to take it, runner.ConsumeBound) after %s of the drain: %s\nrunner warnings: %s\nrunners:\n%s\ntrails:\n%s\nlatest logs:\n%s",
				h.cfg.name, overdue, h.bound(), time.Since(start).Round(time.Millisecond), state, h.lc.summary(), h.describe(state), h.trails(state, 3), strings.Join(h.lc.latest(80), "\n"))
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not drained after %s: %s\nrunner warnings: %s\nrunners:\n%s\ntrails:\n%s\nlatest logs:\n%s", h.cfg.name, h.cfg.drain, state, h.lc.summary(), h.describe(state), h.trails(state, 3), strings.Join(h.lc.latest(80), "\n"))
		}
		time.Sleep(250 * time.Millisecond) // poll interval
	}
}

// consumption is a message's consumption, for a report.
type consumption struct {
	desc   string
	thread string
	seq    uint64 // the consuming event
}

// consumedLate checks the log against the bound, the faults having stopped
// at calm: each message is consumed by h.due. It returns the slowest wait
// past the time its thread was free to take it, which one, and the late
// messages as the drain's state (thread(...) words) for the trails.
func (h *harness) consumedLate(envs []events.Envelope, calm time.Time) (slowest time.Duration, which consumption, late []string) {
	threads := byThread(envs)
	for _, th := range slices.Sorted(maps.Keys(threads)) {
		tenvs := threads[th]
		stored := make(map[uint64]time.Time, len(tenvs))
		for _, e := range tenvs {
			stored[e.Seq] = e.Stored
		}
		v := projections.Fold(th, tenvs)
		for _, m := range v.Messages {
			if m.Consumed == nil || m.Consumed.Kind == projections.ConsumedForked || h.isForged(m.Consumed.Seq) {
				continue // a forged consumption is no runner's
			}
			at := stored[m.Consumed.Seq]
			ended := lastEnd(tenvs, m.Consumed.Seq)
			wait := at.Sub(later(later(calm, m.Posted), ended))
			desc := fmt.Sprintf("%s(pending seq %d consumed at seq %d after %s)", th, m.Seq, m.Consumed.Seq, wait.Round(time.Millisecond))
			if wait > slowest {
				slowest, which = wait, consumption{desc: desc, thread: th, seq: m.Consumed.Seq}
			}
			if at.After(h.due(calm, m.Posted, ended)) {
				late = append(late, desc)
			}
		}
	}
	return slowest, which, late
}

// facts are the figures of a log.
type facts struct {
	events, posts, claims, takeovers, released int
	started, completed, failed, abandoned      int
	answers, steering, outputs, requests       int
}

func logFacts(envs []events.Envelope) facts {
	var f facts
	held := map[string]bool{} // thread -> its newest claim is not released
	for _, e := range envs {
		f.events++
		switch e.Type {
		case events.TypeMessagePosted:
			f.posts++
		case events.TypeThreadClaimed:
			f.claims++
			if held[e.Thread] {
				f.takeovers++ // claimed from a holder that did not release
			}
			held[e.Thread] = true
		case events.TypeThreadReleased:
			f.released++
			held[e.Thread] = false
		case events.TypeRunStarted:
			f.started++
		case events.TypeRunCompleted:
			f.completed++
		case events.TypeRunFailed:
			f.failed++
		case events.TypeRunAbandoned:
			f.abandoned++
		case events.TypeAnswerGiven:
			f.answers++
		case events.TypeSteeringGiven:
			f.steering++
		case events.TypeRunOutput:
			f.outputs++
		case events.TypeRequestOpened:
			f.requests++
		}
	}
	return f
}

// isForged reports whether seq is an event the forger stored.
func (h *harness) isForged(seq uint64) bool {
	_, ok := h.forged[seq]
	return ok
}

// consumer returns the message sequence a consuming event consumed, or 0.
func consumer(ev *eventspb.Event) uint64 {
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_RunStarted:
		return b.RunStarted.GetPromptSeq()
	case *eventspb.Event_AnswerGiven:
		return b.AnswerGiven.GetMessageSeq()
	case *eventspb.Event_SteeringGiven:
		return b.SteeringGiven.GetMessageSeq()
	}
	return 0
}

// checkConsumed checks every thread's log: each message id is stored once,
// each acknowledged post is there with its acked sequence, and each message
// is consumed exactly once, by the fold and by counting consuming events;
// a message a forged event took first (h.forged) is exempt.
// It returns the problems found, at most max of them.
func (h *harness) checkConsumed(envs []events.Envelope, max int) []string {
	var bad []string
	report := func(format string, args ...any) {
		if len(bad) < max {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	threads := byThread(envs)
	h.posts.mu.Lock()
	acked, refused := h.posts.acked, h.posts.refused
	h.posts.mu.Unlock()
	for _, th := range slices.Sorted(maps.Keys(threads)) {
		tenvs := threads[th]
		v := projections.Fold(th, tenvs)
		uses := map[uint64]int{}         // by honest writers
		forgedFirst := map[uint64]bool{} // a forged event consumed it before any honest one
		for _, e := range tenvs {
			if e.Event != nil {
				if m := consumer(e.Event); m != 0 {
					if h.isForged(e.Seq) {
						forgedFirst[m] = forgedFirst[m] || uses[m] == 0
						continue
					}
					uses[m]++
				}
			}
		}
		ids := map[string]uint64{}
		for _, m := range v.Messages {
			if prev, dup := ids[m.MessageID]; dup {
				report("%s: message id %s stored twice, seqs %d and %d", th, m.MessageID, prev, m.Seq)
			}
			ids[m.MessageID] = m.Seq
			if forgedFirst[m.Seq] {
				continue // taken by a forgery; an honest write after it is an I1 the audit reports
			}
			if m.Consumed == nil {
				report("%s: message %d (%s) never consumed", th, m.Seq, m.MessageID)
			}
			if uses[m.Seq] != 1 {
				report("%s: message %d (%s) consumed %d times", th, m.Seq, m.MessageID, uses[m.Seq])
			}
		}
		for id, seq := range acked[th] {
			if got, ok := ids[id]; !ok || got != seq {
				report("%s: acked post %s (seq %d) not in the log as acked (found seq %d)", th, id, seq, got)
			}
		}
		for id := range refused[th] {
			if seq, ok := ids[id]; ok {
				report("%s: post %s was refused (409, nothing written) but is in the log at seq %d", th, id, seq)
			}
		}
	}
	for th := range acked {
		if _, ok := threads[th]; !ok {
			report("%s: acked posts but no events", th)
		}
	}
	return bad
}

// summary prints the run's figures.
func (h *harness) summary(envs []events.Envelope, rep audit.Report, drained time.Duration) {
	f := logFacts(envs)
	h.statsMu.Lock()
	rs := h.runStats
	h.statsMu.Unlock()
	lines := []string{
		fmt.Sprintf("%s: seed=%d (replay: CHAOS_SEED=%d) runners=%d threads=%d ttl=%s fault-phase=%s drain=%s total=%s",
			h.cfg.name, h.cfg.seed, h.cfg.seed, h.cfg.runners, h.cfg.threads, h.cfg.ttl, h.cfg.faults, drained.Round(time.Millisecond), time.Since(h.start).Round(time.Millisecond)),
		fmt.Sprintf("  log: events=%d posts=%d (acked ids %d) claims=%d taken-over=%d released=%d runs started=%d completed=%d failed=%d abandoned=%d answers=%d steering=%d",
			f.events, f.posts, h.posts.count(), f.claims, f.takeovers, f.released, f.started, f.completed, f.failed, f.abandoned, f.answers, f.steering),
		fmt.Sprintf("  fenced writes refused=%d (%s)", h.stats.sum("refused_fenced:"), h.stats.list("refused_fenced:")),
		fmt.Sprintf("  stale run-subject writes refused=%d (%s)", h.stats.sum("refused_cas:"), h.stats.list("refused_cas:")),
		fmt.Sprintf("  guarded writes refused, the run subject moved=%d (%s)", h.stats.sum("refused_run_moved:"), h.stats.list("refused_run_moved:")),
		fmt.Sprintf("  appends with unknown outcome after retries=%d (%s); duplicate acks on append=%d", h.stats.sum("unknown_outcome:"), h.stats.list("unknown_outcome:"), h.stats.sum("duplicate_ack:")),
		fmt.Sprintf("  runners (sum over all lives): claims=%d abandoned=%d fenced=%d completed=%d failed=%d wake-ups kept parked past a claim=%d", rs.Claims, rs.Abandoned, rs.Fenced, rs.Completed, rs.Failed, rs.KeptParked),
		fmt.Sprintf("  faults injected=%d: %s", h.faults.sum(""), h.faults.list("")),
		fmt.Sprintf("  posts: %s", h.stats.list("post:")),
		h.httpSummary(),
		fmt.Sprintf("  audit: violations=%d anomalies=%d checks=%v", rep.ViolationCount, rep.AnomalyCount, rep.Checks),
		fmt.Sprintf("  runner/store warnings: %s", h.lc.summary()),
	}
	for i, a := range rep.Anomalies {
		if i == 5 {
			break
		}
		lines = append(lines, fmt.Sprintf("  anomaly %s seq %d %s: %s", a.Thread, a.Seq, a.Type, a.Message))
		if i < 2 {
			lines = append(lines, around(envs, a.Thread, a.Seq, 8)...)
		}
	}
	if n := h.stats.sum("stepdown:"); n > 0 {
		lines = append(lines, fmt.Sprintf("  step-downs refused: %s", h.stats.list("stepdown:")))
	}
	h.t.Log("\n" + strings.Join(lines, "\n"))
}

// around lists thread's last n events up to seq, for a report.
func around(envs []events.Envelope, thread string, seq uint64, n int) []string {
	var out []string
	for _, e := range envs {
		if e.Thread != thread || e.Seq > seq {
			continue
		}
		line := fmt.Sprintf("    %d %s %s msgid=%s", e.Seq, e.Stored.Format("15:04:05.000"), e.Type, e.MsgID)
		if ev := e.Event; ev != nil {
			line += fmt.Sprintf(" claim_seq=%d holder=%s", ev.GetClaimSeq(), ev.GetHolder())
			switch b := ev.GetBody().(type) {
			case *eventspb.Event_RunStarted:
				line += " run=" + b.RunStarted.GetRunId()
			case *eventspb.Event_RunCompleted:
				line += " run=" + b.RunCompleted.GetRunId()
			case *eventspb.Event_RunFailed:
				line += " run=" + b.RunFailed.GetRunId()
			case *eventspb.Event_RunAbandoned:
				line += " run=" + b.RunAbandoned.GetRunId()
			case *eventspb.Event_MessagePosted:
				line += fmt.Sprintf(" id=%s strategy=%s", b.MessagePosted.GetMessageId(), b.MessagePosted.GetStrategy())
			}
			if e.ExpectSeq != 0 || e.ExpectSubject != "" {
				line += fmt.Sprintf(" expect=%d@%s", e.ExpectSeq, e.ExpectSubject)
			}
		}
		out = append(out, line)
	}
	return out[max(0, len(out)-n):]
}

// dumpStacks writes every goroutine's stack to the file CHAOS_STACKS
// names, if set: where a stuck runner waits.
func dumpStacks(t *testing.T) {
	path := os.Getenv("CHAOS_STACKS")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		t.Logf("stacks: %v", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		t.Logf("stacks: %v", err)
	}
	t.Logf("goroutine stacks written to %s", path)
}

// checkLayout checks that the log is in the layout the run asked for
// (config.fence): each partition stream's metadata records it
// (natsstore.MetaFence "run" for RUNFENCE, absent for the claim layout),
// and every claim marker and release is on the subject the layout keeps
// them on (the run subject under RUNFENCE, else the claim subject).
func (h *harness) checkLayout(envs []events.Envelope) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, stream := range h.streams() {
		meta := h.streamInfo(ctx, stream).Config.Metadata
		want, has := "", false
		if h.cfg.runFenced() {
			want, has = string(natsstore.FenceRun), true
		}
		if got, ok := meta[natsstore.MetaFence]; ok != has || got != want {
			h.t.Errorf("stream %s: metadata %s=%q (set %v), want %q (set %v)", stream, natsstore.MetaFence, got, ok, want, has)
		}
	}
	subj := h.subjects()
	var markers, wrong int
	for _, e := range envs {
		if e.Type != events.TypeThreadClaimed && e.Type != events.TypeThreadReleased {
			continue
		}
		markers++
		if want := subj.KindOf(e.Type); e.Kind != want {
			wrong++
			if wrong <= 3 {
				h.t.Errorf("seed %d: %s on %s at %d is on its %s subject, want %s (fence %q)", h.cfg.seed, e.Type, e.Thread, e.Seq, e.Kind, want, h.cfg.fence)
			}
		}
	}
	h.t.Logf("%s: fence layout %q: %d claim markers and releases, %d on the wrong subject", h.cfg.name, h.cfg.fence, markers, wrong)
	if markers == 0 {
		h.t.Errorf("seed %d: no claim marker in the log", h.cfg.seed)
	}
}

// checkReleases holds each release the store refused to its reason. A
// release is a compare-and-set on the subject the layout keeps releases
// on (the claim subject, or the run subject under RUNFENCE), expecting
// the last sequence there that the holder knows (its claim's marker, or
// under RUNFENCE the run subject's last it read, events.ReleaseClaimAt).
// Its refusal must be explained by an event on that subject after what it
// expected that its holder did not write under that claim: a newer claim,
// or another writer's event. A release refused over the holder's own
// writes only expected a sequence older than what it knew, and leaves its
// marker unreleased for no reason (liveness: the next claimant takes the
// thread over instead of finding it released).
func (h *harness) checkReleases(envs []events.Envelope) {
	h.t.Helper()
	refs := h.releases.list()
	kind := h.subjects().KindOf(events.TypeThreadReleased)
	threads := byThread(envs)
	var own []string
	for _, r := range refs {
		explained, after := false, 0
		for _, e := range threads[r.thread] {
			if e.Seq <= r.expect || e.Kind != kind {
				continue
			}
			after++
			if e.Event == nil || e.Event.GetClaimSeq() != r.claim || e.Event.GetHolder() != r.holder {
				explained = true
				break
			}
		}
		if !explained {
			own = append(own, fmt.Sprintf("%s claim %d by %s expecting %d (%d events of its own after it)", r.thread, r.claim, r.holder, r.expect, after))
		}
	}
	h.t.Logf("%s: %d releases refused, %d of them over the holder's own writes only", h.cfg.name, len(refs), len(own))
	if len(own) > 0 {
		h.t.Errorf("seed %d: %d releases refused with no newer claim or other writer's event after what they expected (fence %q): %s",
			h.cfg.seed, len(own), h.cfg.fence, strings.Join(own[:min(len(own), 10)], "; "))
	}
}
