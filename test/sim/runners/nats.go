package runners

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
)

// The simulation on natsstore. A seed run with Config.NATS does what it
// does on memstore, with the same checks, but every store handle is a
// natsstore.Store on one embedded nats-server, in a stream and buckets of
// the seed's own, used only through its events.Store methods. What is
// simulated and what is real:
//
//   - Simulated: the clock every store handle, scheduler and core reads
//     (natsstore.Config.Now), so a lease or session lapses for an
//     acquirer by simulated time, and posts and events carry it; and the
//     faults, drawn from the seed's PRNG and struck around the real call
//     as memstore strikes them (a failed write is not sent; a lost ack is
//     sent, stored, and reported unavailable).
//   - Simulated for the server: a session's expiry. The server expires a
//     session key on its real clock, TTL (10 s) after its last write; a
//     run crosses many simulated TTLs in a second of real time. So, as
//     memstore's AfterFunc does, the simulation deletes the key itself
//     (CloseSession at the revision written) once simulated time passes
//     TTL after each write that was not renewed: the watches then see the
//     session go as they see a server expiry.
//   - Real: everything else the server does: compare-and-set on the
//     stream and the lease bucket, deduplication by message id (checked
//     after the expected sequence on one server), the KV watch, and the
//     server's own TTLs, which fire only if a seed stalls 10 s of real
//     time (Stats.RealExpiries).
//
// Two things the server does off the simulation's goroutine are made
// deterministic points: the checker reads the log by loading each thread
// after a step that wrote, and each lease watch is read up to a barrier,
// a write the checker makes to a lease no runner sees, after a step that
// wrote to the bucket: the watch is ordered, so what came before the
// barrier has all arrived.
//
// What is not deterministic: natsstore draws session ids (nuid), and the
// schedulers' ownership hashes over them, so a natsstore seed replays its
// choices but not always its outcome. Traces name sessions by the order
// they were opened. Every check applies all the same.

// NATS is a JetStream server that seeds can run on ([Config.NATS]). Each
// seed gets a fresh stream, subject prefix and buckets, deleted when the
// seed ends.
type NATS struct {
	// URL is the server's client URL.
	URL string
	// Timeout bounds each store call (natsstore.Config.Timeout). Default
	// natsstore.DefaultTimeout.
	Timeout time.Duration

	n atomic.Uint64 // names each seed's stream and buckets
}

// barrierThread is the thread of the checker's barrier lease. No runner
// sees it: pollNATSWatches drops its updates.
const barrierThread = "simbarrier"

// sessionExpiry is when the server expires a session key after its last
// write: its TTL in whole seconds, rounded up (natsstore's serverTTL).
var sessionExpiry = ((TTL + time.Second - 1) / time.Second) * time.Second

// natsWorld is one seed's natsstore side.
type natsWorld struct {
	env    *NATS
	n      uint64     // the seed's number on the server: its names
	nc     *nats.Conn // shared by the seed's stores
	stream string
	bucket string
	snaps  string
	ids    string
	fence  natsstore.FenceLayout // every handle's, explicit
	stores []*natsstore.Store

	wrote   bool              // a stream write was tried since the checker read
	kvWrote bool              // a bucket write was tried since the barrier
	read    map[string]uint64 // the last sequence the checker read, per thread
	barrier events.Lease
	sessRev map[string]uint64 // each session's last revision written
}

// openNATS connects to cfg.NATS and opens the checker's and the poster's
// handles in a stream and buckets of this seed's own.
func (w *world) openNATS() {
	env := w.cfg.NATS
	n := env.n.Add(1)
	nw := &natsWorld{
		env:     env,
		n:       n,
		stream:  fmt.Sprintf("SIMR%d", n),
		bucket:  fmt.Sprintf("simrclaims%d", n),
		snaps:   fmt.Sprintf("simrsnaps%d", n),
		ids:     fmt.Sprintf("simrids%d", n),
		read:    map[string]uint64{},
		sessRev: map[string]uint64{},
		fence:   natsstore.FenceClaim,
	}
	if w.subj.RunFence {
		nw.fence = natsstore.FenceRun
	}
	w.nats = nw
	nc, err := nats.Connect(env.URL, nats.Name(fmt.Sprintf("runners seed %d", w.seed)))
	if err != nil {
		w.fail(CheckStore, fmt.Sprintf("connect to %s: %v", env.URL, err))
		return
	}
	nw.nc = nc
	// The checker's handle: no faults.
	reader, err := nw.open(w.ctx, w.clock.Now)
	if err != nil {
		w.fail(CheckStore, fmt.Sprintf("open the checker's store: %v", err))
		return
	}
	w.reader = reader
	w.poster = w.openNATSStore(&w.postFlt)
}

func (nw *natsWorld) open(ctx context.Context, now func() time.Time) (*natsstore.Store, error) {
	s, err := natsstore.New(ctx, natsstore.Config{
		Conn:            nw.nc,
		Stream:          nw.stream,
		Prefix:          fmt.Sprintf("simr%d", nw.n),
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

// openNATSStore opens a handle on the seed's stream whose writes take the
// fault fs holds; nil when it could not (the run has failed).
func (w *world) openNATSStore(fs *faults) events.Store {
	if w.res.Failed() {
		return nil
	}
	s, err := w.nats.open(w.ctx, w.clock.Now)
	if err != nil {
		w.fail(CheckStore, fmt.Sprintf("open a store: %v", err))
		return nil
	}
	return &natsHandle{Store: s, w: w, faults: fs}
}

// close stops the seed's watches, closes its stores and deletes its stream
// and buckets.
func (w *world) close() {
	nw := w.nats
	if nw == nil || nw.nc == nil {
		return
	}
	defer nw.nc.Close()
	for _, r := range w.runners {
		if r.watch != nil {
			r.watch.Stop()
		}
	}
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
		// Best effort: the server's directory goes with the test.
		_ = js.DeleteStream(ctx, name)
	}
}

// readNATS loads what each thread gained since the checker last read it,
// after a step that may have written: the log in sequence order.
func (w *world) readNATS() []events.Envelope {
	nw := w.nats
	if nw == nil || !nw.wrote || w.reader == nil {
		return nil
	}
	nw.wrote = false
	var out []events.Envelope
	for _, th := range w.threads {
		envs, err := w.reader.Load(w.ctx, th, nw.read[th]+1)
		if err != nil {
			w.fail(CheckStore, fmt.Sprintf("the checker loads %s: %v", th, err))
			return nil
		}
		if n := len(envs); n > 0 {
			nw.read[th] = envs[n-1].Seq
		}
		out = append(out, envs...)
	}
	slices.SortFunc(out, func(a, b events.Envelope) int { return int(a.Seq) - int(b.Seq) })
	return out
}

// pollNATSWatches reads each runner's lease watch up to a barrier, after a
// step that may have written to the lease bucket.
func (w *world) pollNATSWatches() {
	nw := w.nats
	if !nw.kvWrote || w.res.Failed() {
		return
	}
	nw.kvWrote = false
	var err error
	if nw.barrier.Revision != 0 {
		nw.barrier, err = w.reader.RenewLease(w.ctx, nw.barrier)
	}
	if nw.barrier.Revision == 0 || err != nil {
		nw.barrier, err = w.reader.AcquireLease(w.ctx, barrierThread, "checker", time.Hour)
	}
	if err != nil {
		w.fail(CheckStore, fmt.Sprintf("the checker writes its barrier lease: %v", err))
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	for _, r := range w.runners {
		if r.state == dead {
			continue
		}
		for {
			u, err := r.watch.Next(ctx)
			if err != nil {
				w.fail(CheckStore, fmt.Sprintf("%s's lease watch, waiting for the barrier at revision %d: %v", r.name, nw.barrier.Revision, err))
				return
			}
			if u.Thread == barrierThread {
				if u.Revision >= nw.barrier.Revision {
					break
				}
				continue
			}
			r.watchQ = append(r.watchQ, u)
		}
	}
}

// wroteSession records a session write that landed and arms its expiry.
func (w *world) wroteSession(ss events.Session) {
	nw := w.nats
	w.nameSession(ss.ID)
	nw.sessRev[ss.ID] = ss.Revision
	w.afterFunc(sessionExpiry, func() { w.expireSession(ss) })
}

// expireSession does the server's expiry of ss's key, unless it was
// written again since.
func (w *world) expireSession(ss events.Session) {
	nw := w.nats
	if nw.sessRev[ss.ID] != ss.Revision || w.res.Failed() {
		return
	}
	nw.kvWrote = true
	err := w.reader.CloseSession(w.ctx, ss)
	switch {
	case err == nil:
		w.res.Stats.SimExpiries++
		w.tracef("server expires session %s", w.sid(ss.ID))
	case errors.Is(err, events.ErrLeaseLost):
		// The server's real TTL came first: the seed stalled 10 s.
		w.res.Stats.RealExpiries++
		w.tracef("server expired session %s on its real clock", w.sid(ss.ID))
	default:
		w.fail(CheckStore, fmt.Sprintf("the server's expiry of session %s: %v", w.sid(ss.ID), err))
	}
}

// natsHandle is a natsstore handle with the simulation's faults struck
// around each write, as memstore strikes them.
type natsHandle struct {
	events.Store
	w      *world
	faults *faults
}

func injected(op string, f memstore.Fault) error {
	if f == memstore.LoseAck {
		return fmt.Errorf("%w: sim: %s ack lost (injected around natsstore); outcome unknown", events.ErrUnavailable, op)
	}
	return fmt.Errorf("%w: sim: %s failed (injected around natsstore); nothing written", events.ErrUnavailable, op)
}

// Append implements [events.Appender] with the drawn fault.
func (h *natsHandle) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	f := h.faults.hook("append", "")
	if f == memstore.FailBefore {
		return events.Ack{}, injected("append", f)
	}
	h.w.nats.wrote = true
	ack, err := h.Store.Append(ctx, ev, chk, opts...)
	if err == nil && f == memstore.LoseAck {
		return events.Ack{}, injected("append", f)
	}
	return ack, err
}

// Post implements [events.Poster] with the drawn fault.
func (h *natsHandle) Post(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...events.PostOption) (events.Ack, error) {
	f := h.faults.hook("post", "")
	if f == memstore.FailBefore {
		return events.Ack{}, injected("post", f)
	}
	h.w.nats.wrote = true
	ack, err := h.Store.Post(ctx, thread, m, opts...)
	if err == nil && f == memstore.LoseAck {
		return events.Ack{}, injected("post", f)
	}
	return ack, err
}

// leaseWrite strikes a lease or session write's fault: any fault fails it
// before it is sent, as on memstore.
func (h *natsHandle) leaseWrite(what string) error {
	if f := h.faults.hook("lease", ""); f != memstore.NoFault {
		return injected(what, memstore.FailBefore)
	}
	h.w.nats.kvWrote = true
	return nil
}

// AcquireLease implements [events.Leaser] with the drawn fault.
func (h *natsHandle) AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (events.Lease, error) {
	if err := h.leaseWrite("lease acquire"); err != nil {
		return events.Lease{}, err
	}
	return h.Store.AcquireLease(ctx, thread, holder, ttl)
}

// RenewLease implements [events.Leaser] with the drawn fault.
func (h *natsHandle) RenewLease(ctx context.Context, l events.Lease) (events.Lease, error) {
	if err := h.leaseWrite("lease renew"); err != nil {
		return events.Lease{}, err
	}
	return h.Store.RenewLease(ctx, l)
}

// ReleaseLease implements [events.Leaser]. No fault strikes it, as on
// memstore.
func (h *natsHandle) ReleaseLease(ctx context.Context, l events.Lease) error {
	h.w.nats.kvWrote = true
	return h.Store.ReleaseLease(ctx, l)
}

// AcquireSessionLease implements [events.SessionLeaser] with the drawn
// fault.
func (h *natsHandle) AcquireSessionLease(ctx context.Context, thread, holder string, s events.Session) (events.Lease, error) {
	if err := h.leaseWrite("lease acquire"); err != nil {
		return events.Lease{}, err
	}
	return h.Store.AcquireSessionLease(ctx, thread, holder, s)
}

// OpenSession implements [events.SessionLeaser] with the drawn fault, and
// arms the session's expiry.
func (h *natsHandle) OpenSession(ctx context.Context, owner string, ttl time.Duration) (events.Session, error) {
	if err := h.leaseWrite("session write"); err != nil {
		return events.Session{}, err
	}
	s, err := h.Store.OpenSession(ctx, owner, ttl)
	if err == nil {
		h.w.wroteSession(s)
	}
	return s, err
}

// RenewSession implements [events.SessionLeaser] with the drawn fault, and
// arms the session's expiry again.
func (h *natsHandle) RenewSession(ctx context.Context, s events.Session) (events.Session, error) {
	if err := h.leaseWrite("session write"); err != nil {
		return events.Session{}, err
	}
	ns, err := h.Store.RenewSession(ctx, s)
	if err == nil {
		h.w.wroteSession(ns)
	}
	return ns, err
}

// CloseSession implements [events.SessionLeaser].
func (h *natsHandle) CloseSession(ctx context.Context, s events.Session) error {
	h.w.nats.kvWrote = true
	return h.Store.CloseSession(ctx, s)
}
