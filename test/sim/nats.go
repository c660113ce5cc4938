package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections/audit"
)

// The simulation on natsstore (issue 14, item 6). A seed run with
// Config.NATS does what it does on memstore, with the same checks, but
// every process's store handle is a natsstore.Store on one embedded
// nats-server, in a stream and buckets of the seed's own. The faults
// memstore injects are injected around the real store, half of them at
// each of two levels, drawn from the seed's PRNG:
//
//   - around the call, as memstore does: a failed write returns
//     ErrUnavailable without calling natsstore; a lost ack calls it and
//     then returns ErrUnavailable, so the core's own recovery (sync, plan
//     again, retry the outbox with the same message id) runs against the
//     server;
//   - inside the call, on its first publish attempt (natsstore.WrapSend):
//     the attempt fails before it is sent, or it is sent and its ack is
//     lost (a timeout). natsstore must then settle the outcome itself: its
//     retry with the same Nats-Msg-Id comes back as a duplicate ack, or, on
//     this single server, which checks the expected sequence before it
//     deduplicates, as wrong-last-sequence (10071), and only reading the
//     subject back tells whether the first attempt landed (publish.go,
//     settle and findLanded). Half of the time another process's write,
//     or its takeover, lands before the retry (race), so the retry's
//     check fails and the landed write may no longer be its subject's
//     last message. NATSStats counts each way an ambiguity was settled,
//     and CheckSettled checks each settlement against what the
//     simulation knows landed.
//
// What stays deterministic: the seed fixes every choice the simulation
// makes (actions, faults, clocks), and the server's answers follow from
// the writes, so two runs of a seed give the same trace, unless the real
// server times out on a stalled machine (NATSStats.RealTimeouts) or a
// lease outlives its server-side TTL (10 s of real time) and is removed.
// Those change outcomes, never what must hold: every check still applies.
// Seeds are printed, and a failing one is replayed with its trace.

// CheckStore: every read the simulation makes is answered. It can fail
// only on natsstore, when the real server does not answer in time.
const CheckStore = "StoreAnswers"

// CheckSettled: natsstore settles an append, post or lease write whose ack
// was lost as written, at the sequence it was stored at, or leaves it
// unknown; never as refused. Only natsstore seeds check it: the simulation
// knows the truth there because it lost the ack itself.
const CheckSettled = "UnknownSettledRight"

// NATS is a JetStream server that seeds can run on ([Config.NATS]). One
// serves any number of seeds, in turn or in parallel: each gets a fresh
// stream, subject prefix and buckets, deleted when the seed ends.
type NATS struct {
	// URL is the server's client URL.
	URL string
	// Timeout bounds each store call (natsstore.Config.Timeout). Default
	// natsstore.DefaultTimeout.
	Timeout time.Duration

	n atomic.Uint64 // names each seed's stream and buckets
}

// NATSStats counts what a natsstore seed's faults exercised inside
// natsstore: how each ambiguous publish was settled.
type NATSStats struct {
	// SendFaults is the publish attempts failed before sending or sent
	// with their ack lost, inside natsstore (WrapSend).
	SendFaults int
	// CallFaults is the calls failed, or whose ack was lost, around
	// natsstore.
	CallFaults int
	// DupSettled is the ambiguous attempts settled by a duplicate ack.
	DupSettled int
	// ReadBackLanded is the calls whose retry was refused (10071) after an
	// attempt that may have landed, and that read the subject back and
	// found it had: settled as written. Every such call returns success
	// though its last attempt was refused, which only the read-back does.
	ReadBackLanded int
	// ReadBackScanned is the ReadBackLanded calls whose write was no
	// longer its subject's last message when read back (another writer's
	// landed after it), so natsstore had to scan forward to find it.
	ReadBackScanned int
	// ReadBackRefused is the calls with an injected ambiguous attempt whose
	// retry was refused (10071) and whose read-back found nothing: settled
	// as not written.
	ReadBackRefused int
	// Races is the writes of other processes let land between an
	// ambiguous attempt and its retry.
	Races int
	// LeaseSuperseded is the lease writes whose ack was lost and that
	// another writer's superseded before the retry: reported as the
	// lease's loss, since the bucket no longer holds them (see
	// checkSettled).
	LeaseSuperseded int
	// RetriedOK is the calls whose injected failed attempt was simply sent
	// again and stored.
	RetriedOK int
	// Unknown is the calls that returned an unknown outcome from inside
	// natsstore.
	Unknown int
	// RealTimeouts is the attempts that failed without an injected fault:
	// the machine stalled. They make a run differ from a replay.
	RealTimeouts int
}

// Add adds o to s.
func (s *NATSStats) Add(o NATSStats) {
	s.SendFaults += o.SendFaults
	s.CallFaults += o.CallFaults
	s.DupSettled += o.DupSettled
	s.ReadBackLanded += o.ReadBackLanded
	s.ReadBackRefused += o.ReadBackRefused
	s.ReadBackScanned += o.ReadBackScanned
	s.RetriedOK += o.RetriedOK
	s.Races += o.Races
	s.LeaseSuperseded += o.LeaseSuperseded
	s.Unknown += o.Unknown
	s.RealTimeouts += o.RealTimeouts
}

// natsWorld is one seed's natsstore side.
type natsWorld struct {
	env    *NATS
	nc     *nats.Conn // shared by the seed's stores; closing it ends them
	stream string
	bucket string
	snaps  string
	ids    string                // the message-id bucket
	fence  natsstore.FenceLayout // every handle's, explicit
	stores []*natsstore.Store
	wrote  bool // a write was tried since the checker last loaded
	racing bool // a write is interleaved into another's retry
	// stored is the last sequence each subject was seen stored at, by an
	// ack (lost or not) of any handle.
	stored map[string]uint64
}

// wroteSinceCheck reports whether the log may have grown since the checker
// last loaded it. Every write goes through a natsHandle, so on natsstore
// the checker skips the round trips of a load after steps that wrote
// nothing; memstore loads are free.
func (w *world) wroteSinceCheck() bool {
	if w.nats == nil {
		return true
	}
	wrote := w.nats.wrote
	w.nats.wrote = false
	return wrote
}

func (w *world) logName() string {
	if w.nats != nil {
		return "natsstore (one server: checks before it deduplicates)"
	}
	return ModeOf(w.seed).String()
}

// newAuditor returns an auditor for the seed's subjects.
func (w *world) newAuditor() *audit.Auditor {
	if w.nats == nil {
		return audit.NewWithOptions(audit.Options{Subjects: w.subj})
	}
	return audit.NewWithOptions(audit.Options{Subjects: events.Subjects{Prefix: w.nats.prefix(), RunFence: w.subj.RunFence}})
}

// prefix is the seed's subject prefix: one stream per seed, on one server,
// so their subjects must not overlap.
func (nw *natsWorld) prefix() string { return "sim" + nw.stream[len("SIM"):] }

// storeFailed records a store call that failed where the simulation needs
// an answer. It ends the run whatever Config.Fatal says.
func (w *world) storeFailed(what string, err error) bool {
	if w.res.Check == "" {
		w.res.Check, w.res.Failure = CheckStore, fmt.Sprintf("%s: %v", what, err)
		w.tracef("FAIL %s: %s", w.res.Check, w.res.Failure)
	}
	return true
}

// openNATS connects to cfg.NATS and opens the checker's and the poster's
// handles, in a stream and buckets of this seed's own.
func (w *world) openNATS() {
	env := w.cfg.NATS
	n := env.n.Add(1)
	nw := &natsWorld{
		env:    env,
		stored: make(map[string]uint64),
		stream: fmt.Sprintf("SIM%d", n),
		bucket: fmt.Sprintf("simclaims%d", n),
		snaps:  fmt.Sprintf("simsnaps%d", n),
		ids:    fmt.Sprintf("simids%d", n),
		fence:  natsstore.FenceClaim,
	}
	if w.subj.RunFence {
		nw.fence = natsstore.FenceRun
	}
	w.nats = nw
	nc, err := nats.Connect(env.URL, nats.Name(fmt.Sprintf("sim seed %d", w.seed)))
	if err != nil {
		w.storeFailed("connect to "+env.URL, err)
		return
	}
	nw.nc = nc
	reader, err := nw.open(w.ctx, nil)
	if err != nil {
		w.storeFailed("open the checker's store", err)
		return
	}
	w.reader = reader
	w.poster = w.wrap(nw, &w.postFlt, nil, nil)
}

// open opens one store on the seed's stream, with clock now (nil: the
// wall clock, as memstore's default).
func (nw *natsWorld) open(ctx context.Context, now func() time.Time) (*natsstore.Store, error) {
	s, err := natsstore.New(ctx, natsstore.Config{
		Conn:            nw.nc,
		Stream:          nw.stream,
		Prefix:          nw.prefix(),
		Bucket:          nw.bucket,
		SnapshotBucket:  nw.snaps,
		MessageIDBucket: nw.ids,
		Timeout:         nw.env.Timeout,
		Now:             now,
		Fence:           nw.fence,
	})
	if err != nil {
		return nil, err
	}
	nw.stores = append(nw.stores, s)
	return s, nil
}

// openNATSProc opens p's handle: its own store, with its clock and its
// faults.
func (w *world) openNATSProc(p *proc) events.Store {
	if w.res.Failed() {
		return nil
	}
	return w.wrap(w.nats, &p.faults, p.clock.Now, p)
}

func (w *world) wrap(nw *natsWorld, fs *faults, now func() time.Time, owner *proc) events.Store {
	s, err := nw.open(w.ctx, now)
	if err != nil {
		w.storeFailed("open a process's store", err)
		return nil
	}
	h := &natsHandle{Store: s, w: w, faults: fs, owner: owner}
	s.WrapSend(h.wrapSend)
	return h
}

// close closes the seed's stores and deletes its stream and buckets.
func (w *world) close() {
	nw := w.nats
	if nw == nil || nw.nc == nil {
		return
	}
	defer nw.nc.Close()
	for _, s := range nw.stores {
		s.Close()
	}
	js, err := jetstream.New(nw.nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{nw.stream, "KV_" + nw.bucket, "KV_" + nw.snaps, "KV_" + nw.ids} {
		// Best effort: the server's directory goes with the test binary.
		_ = js.DeleteStream(ctx, name)
	}
}

// natsHandle is a process's (or the poster's) natsstore handle with the
// simulation's faults around it and inside it.
type natsHandle struct {
	*natsstore.Store
	w      *world
	faults *faults // the fault the action drew for its next write
	owner  *proc   // the process, nil for the poster

	armed memstore.Fault // the fault for the current call's first attempt
	call  attempts       // what the current call's attempts met
}

// attempts is what one call's publish attempts met.
type attempts struct {
	n          int
	injected   bool   // an attempt failed or lost its ack by injection
	real       bool   // an attempt failed without an API error, uninjected
	dup        bool   // an attempt was acked as a duplicate
	wrongLast  bool   // an attempt was refused with 10071
	fresh      bool   // an attempt was acked as newly stored
	maybeEarly bool   // the call's message id may have landed before it
	stored     uint64 // where an attempt whose ack was lost landed
	subject    string // the subject written
}

var errInjected = errors.New("sim: injected")

// draw takes the fault the action drew for this write, if any, and picks
// where it strikes: around the call (returned) or inside it, on its first
// publish attempt (armed).
func (h *natsHandle) draw(op string) memstore.Fault {
	h.w.nats.wrote = true
	h.call, h.armed = attempts{}, memstore.NoFault
	f := h.faults.hook(op, "")
	if f == memstore.NoFault {
		return f
	}
	if h.w.rng.IntN(2) == 0 {
		h.w.res.NATS.CallFaults++
		return f
	}
	h.armed = f
	return memstore.NoFault
}

// wrapSend injects the armed fault into the first attempt of a call and
// records what every attempt met.
func (h *natsHandle) wrapSend(next natsstore.SendFunc) natsstore.SendFunc {
	return func(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
		h.call.n++
		f := h.armed
		h.armed = memstore.NoFault
		if f == memstore.FailBefore {
			h.w.res.NATS.SendFaults++
			h.call.injected = true
			h.w.tracef("  (natsstore attempt %d to %s: failed before sending, injected)", h.call.n, shortSubject(m.Subject))
			h.race(m.Subject)
			return nil, fmt.Errorf("%w: attempt failed before sending: %w", errInjected, nats.ErrTimeout)
		}
		h.call.subject = m.Subject
		pa, err := next(ctx, m)
		if err == nil {
			nw := h.w.nats
			nw.stored[m.Subject] = max(nw.stored[m.Subject], pa.Sequence)
		}
		var apiErr *jetstream.APIError
		switch {
		case err == nil && f == memstore.LoseAck:
			h.w.res.NATS.SendFaults++
			h.call.injected = true
			h.call.stored = pa.Sequence
			h.w.tracef("  (natsstore attempt %d to %s: stored at %d, ack lost, injected)", h.call.n, shortSubject(m.Subject), pa.Sequence)
			h.race(m.Subject)
			return nil, fmt.Errorf("%w: ack lost: %w", errInjected, nats.ErrTimeout)
		case err == nil && pa.Duplicate:
			h.call.dup = true
		case err == nil:
			h.call.fresh = true
		case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
			h.call.wrongLast = true
		case !errors.As(err, &apiErr):
			h.call.real = true
			h.w.res.NATS.RealTimeouts++
		}
		if h.call.injected || h.call.maybeEarly && (h.call.dup || h.call.wrongLast) {
			var note string
			switch {
			case err != nil:
				note = err.Error()
			case pa.Duplicate:
				note = fmt.Sprintf("duplicate of %d", pa.Sequence)
			default:
				note = fmt.Sprintf("stored at %d", pa.Sequence)
			}
			h.w.tracef("  (natsstore attempt %d to %s: %s)", h.call.n, shortSubject(m.Subject), note)
		}
		return pa, err
	}
}

// race lets, half of the time, another process's oldest write, its claim,
// or a zombie write of another process land while this one's outcome is
// unknown, before natsstore retries it: the race the read-back is for. A
// retry that then finds its subject moved is refused (10071), and only
// reading back tells whether the first attempt landed; and a write that
// landed is then no longer the subject's last message, so the read-back
// must scan forward for it.
func (h *natsHandle) race(subject string) {
	w := h.w
	if w.nats.racing || w.rng.IntN(2) == 0 {
		return
	}
	// Writers to the same subject first: only they move it, so only they
	// make the retry's check fail and the landed write not the last.
	want := raceKind(subject)
	var same, other []func()
	add := func(kind string, do func()) {
		if kind == want {
			same = append(same, do)
		} else {
			other = append(other, do)
		}
	}
	for _, q := range w.procs {
		switch {
		case q == h.owner:
		case q.core == nil:
			// A takeover writes the lease, the marker's subject (the
			// claim subject, or the run subject under RUNFENCE) and,
			// when it abandons a run, the run subject.
			kind := want
			if kind == string(events.KindPosted) {
				kind = string(w.subj.KindOf(events.TypeThreadClaimed))
			}
			add(kind, func() { w.takeover(q) })
		case len(q.out) > 0:
			add(writesTo(w.subj, q.out[0]), func() { w.doEffect(q) })
		}
	}
	for i, e := range w.zombies {
		if e.owner != h.owner {
			add(writesTo(w.subj, e), func() {
				w.zombies = append(w.zombies[:i], w.zombies[i+1:]...)
				w.exec(e)
			})
		}
	}
	cands := same
	if len(cands) == 0 {
		cands = other
	}
	if len(cands) == 0 {
		return
	}
	w.res.NATS.Races++
	w.tracef("  (meanwhile, before natsstore retries:)")
	w.nats.racing = true
	cands[w.rng.IntN(len(cands))]()
	w.nats.racing = false
}

// takeover has q take the thread while another process's write is in
// flight: q's clock jumps past the TTL, as a stall past the lease does
// (ADR-0069), q claims, and carries out the first writes its core asks
// for, such as abandoning the run the other process's write belongs to.
func (w *world) takeover(q *proc) {
	q.clock.Advance(TTL + time.Second)
	w.tracef("lapse: %s's clock jumps +%s", q.name(), TTL+time.Second)
	w.claim(q)
	for i := 0; i < 2 && q.core != nil && len(q.out) > 0; i++ {
		w.doEffect(q)
	}
}

// raceKind names what writes to subject: a lease key, or a thread's
// subject by its kind.
func raceKind(subject string) string {
	if strings.HasPrefix(subject, "$KV.") {
		return "lease"
	}
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// writesTo names the subject an effect writes to in layout s, "" for none.
func writesTo(s events.Subjects, e effect) string {
	switch e.kind {
	case doAppend:
		return string(s.KindOf(events.TypeOf(e.app.Event)))
	case doRelease:
		return string(s.KindOf(events.TypeThreadReleased))
	}
	return ""
}

// checkSettled checks a call one of whose attempts the server stored at
// c.stored, its ack lost: the store may say the outcome is unknown, but if
// it settles it, it must say written, at that sequence. A refusal would
// claim that nothing was written (DESIGN §3), and the caller would act on
// a falsehood.
//
// One exception: a lease write another writer's has superseded. The
// lease bucket keeps one message per key (History 1), so the superseded
// write is gone and the read-back cannot find it; natsstore answers that
// the lease is another's, which is what holds now, and leases decide
// liveness only. The thread stream keeps everything, so its writes have
// no such exception.
func (h *natsHandle) checkSettled(what string, seq uint64, err error) {
	stored := h.call.stored
	superseded := strings.HasPrefix(h.call.subject, "$KV.") && h.w.nats.stored[h.call.subject] > stored
	switch {
	case superseded && (errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrLeaseLost)):
		h.w.res.NATS.LeaseSuperseded++
	case errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrLeaseLost):
		h.w.fail(CheckSettled, fmt.Sprintf("%s: the server stored it at %d, its ack lost; natsstore said it was refused: %v", what, stored, err))
	case err == nil && seq != stored:
		h.w.fail(CheckSettled, fmt.Sprintf("%s: the server stored it at %d, its ack lost; natsstore said it landed at %d", what, stored, seq))
	}
}

// shortSubject drops a subject's first token, the seed's own prefix (or
// $KV), so traces of two runs of a seed compare equal.
func shortSubject(s string) string {
	if kv, ok := strings.CutPrefix(s, "$KV."); ok {
		// A seed's buckets are numbered per run: leave the number out,
		// so one seed traces alike on every run.
		bucket, key, _ := strings.Cut(kv, ".")
		return strings.TrimRight(bucket, "0123456789") + "." + key
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// settled counts how natsstore settled the call that just returned err.
func (h *natsHandle) settled(what string, seq uint64, err error) {
	c, st := h.call, &h.w.res.NATS
	if c.stored != 0 {
		h.checkSettled(what, seq, err)
	}
	ambiguous := c.injected || c.real || c.maybeEarly
	switch {
	case c.wrongLast && err == nil:
		// Refused, and yet a success: only the read-back returns that.
		st.ReadBackLanded++
		if c.stored != 0 && h.w.nats.stored[c.subject] > c.stored {
			st.ReadBackScanned++
		}
	case !c.injected && !c.real:
	case c.wrongLast:
		st.ReadBackRefused++
	case errors.Is(err, events.ErrUnavailable):
		st.Unknown++
	case c.dup:
		st.DupSettled++
	case c.fresh:
		st.RetriedOK++
	}
	if ambiguous && (c.wrongLast || err != nil) {
		h.w.tracef("  (natsstore settled: %s)", errOK(err))
	}
}

// callFault is the error of a fault struck around the call, worded as
// memstore words it, so traces read alike.
func callFault(op string, f memstore.Fault) error {
	if f == memstore.LoseAck {
		return fmt.Errorf("%w: sim: %s ack lost (injected around natsstore); outcome unknown", events.ErrUnavailable, op)
	}
	return fmt.Errorf("%w: sim: %s failed (injected around natsstore); nothing written", events.ErrUnavailable, op)
}

// Append implements [events.Appender] with the drawn fault.
func (h *natsHandle) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	f := h.draw("append")
	if f == memstore.FailBefore {
		return events.Ack{}, callFault("append", f)
	}
	// The core's appends carry their own message id, which an earlier
	// call may have stored.
	h.call.maybeEarly = len(opts) > 0
	ack, err := h.Store.Append(ctx, ev, chk, opts...)
	h.settled("append "+string(events.TypeOf(ev)), ack.Seq, err)
	if err == nil && f == memstore.LoseAck {
		return events.Ack{}, callFault("append", f)
	}
	return ack, err
}

// Post implements [events.Poster] with the drawn fault.
func (h *natsHandle) Post(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...events.PostOption) (events.Ack, error) {
	f := h.draw("post")
	if f == memstore.FailBefore {
		return events.Ack{}, callFault("post", f)
	}
	h.call.maybeEarly = true // the message id is the client's
	ack, err := h.Store.Post(ctx, thread, m, opts...)
	h.settled("post "+m.GetMessageId(), ack.Seq, err)
	if err == nil && f == memstore.LoseAck {
		return events.Ack{}, callFault("post", f)
	}
	return ack, err
}

// AcquireLease implements [events.Leaser] with the drawn fault. Around the
// call any fault fails it, as on memstore.
func (h *natsHandle) AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (events.Lease, error) {
	if f := h.draw("lease"); f != memstore.NoFault {
		return events.Lease{}, callFault("lease acquire", memstore.FailBefore)
	}
	l, err := h.Store.AcquireLease(ctx, thread, holder, ttl)
	h.settled("lease acquire", l.Revision, err)
	return l, err
}

// RenewLease implements [events.Leaser] with the drawn fault.
func (h *natsHandle) RenewLease(ctx context.Context, l events.Lease) (events.Lease, error) {
	if f := h.draw("lease"); f != memstore.NoFault {
		return events.Lease{}, callFault("lease renew", memstore.FailBefore)
	}
	nl, err := h.Store.RenewLease(ctx, l)
	h.settled("lease renew", nl.Revision, err)
	return nl, err
}

// ReleaseLease implements [events.Leaser]. No fault strikes it, as on
// memstore.
func (h *natsHandle) ReleaseLease(ctx context.Context, l events.Lease) error {
	h.call, h.armed = attempts{}, memstore.NoFault
	return h.Store.ReleaseLease(ctx, l)
}
