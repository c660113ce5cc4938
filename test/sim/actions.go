package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
)

// The actions one step may take. Each draws what it needs from w.rng, in a
// fixed order, so a seed replays exactly.

// writeFault draws the fault of one write: a lost ack (it lands, the caller
// is told it may not have), a failed write (nothing lands), or none.
func (w *world) writeFault() memstore.Fault {
	if w.noFaults {
		return memstore.NoFault
	}
	switch x := w.rng.IntN(100); {
	case x < 8:
		return memstore.LoseAck
	case x < 16:
		return memstore.FailBefore
	}
	return memstore.NoFault
}

func (w *world) countFault(f memstore.Fault) {
	switch f {
	case memstore.LoseAck:
		w.res.Stats.LostAcks++
	case memstore.FailBefore:
		w.res.Stats.FailWrites++
	}
}

// post posts a new message, perhaps losing its ack or failing.
func (w *world) post() {
	w.posts.n++
	id := fmt.Sprintf("m%d", w.posts.n)
	w.posts.ids = append(w.posts.ids, id)
	w.postOnce(id)
}

// repost retries a post with the same message id: one whose outcome the
// client does not know, or, as a client might, one that was acknowledged.
func (w *world) repost() {
	var id string
	if len(w.posts.unacked) > 0 && w.rng.IntN(3) > 0 {
		i := w.rng.IntN(len(w.posts.unacked))
		id = w.posts.unacked[i]
		w.posts.unacked = append(w.posts.unacked[:i], w.posts.unacked[i+1:]...)
	} else {
		id = w.posts.ids[w.rng.IntN(len(w.posts.ids))]
	}
	w.postOnce(id)
}

// forgeRepost writes a message_posted with an id the thread has, past the
// store's id check: a hostile client, or a poster that died between its id
// key and its post and reposted past the deduplication window. It is no
// message: the fold rule keeps it from every process's cores.
// Only an id the store acknowledged is reposted: a forged post of an id
// no post stored yet would be that id's message.
func (w *world) forgeRepost() {
	var acked []string
	for _, id := range w.posts.ids {
		if _, ok := w.posts.acked[id]; ok {
			acked = append(acked, id)
		}
	}
	if len(acked) == 0 {
		return
	}
	id := acked[w.rng.IntN(len(acked))]
	ev := &eventspb.Event{Thread: threadID, Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{
		MessageId: id, Author: "client", Text: "text of " + id}}}
	data, h, err := events.Encode(ev)
	if err != nil {
		panic(err) // a well-formed event always encodes
	}
	seq := w.log.PublishRaw(w.reader.Subjects().Thread(threadID, events.KindPosted), h, data)
	w.tracef("forged repost of %s -> seq %d", id, seq)
}

func (w *world) postOnce(id string) {
	f := w.writeFault()
	w.postFlt = faults{op: "post", f: f}
	ack, err := w.poster.Post(w.ctx, threadID, &eventspb.MessagePosted{MessageId: id, Author: "client", Text: "text of " + id})
	w.postFlt = faults{}
	w.countFault(f)
	if err != nil {
		w.posts.unacked = append(w.posts.unacked, id)
		w.tracef("post %s -> %s", id, short(err))
		return
	}
	if prev, ok := w.posts.acked[id]; ok && prev != ack.Seq {
		w.fail(CheckPostIdempotent, fmt.Sprintf("post %s acknowledged at %d, then again at %d", id, prev, ack.Seq))
	}
	w.posts.acked[id] = ack.Seq
	w.tracef("post %s -> seq %d%s", id, ack.Seq, dupNote(ack))
}

// lapse lets leases lapse: either time passes for everyone past the TTL, or
// one process's clock jumps ahead (skew), so it sees live leases lapsed.
func (w *world) lapse() {
	jump := TTL + time.Duration(w.rng.IntN(int(TTL/time.Millisecond)))*time.Millisecond
	if w.rng.IntN(2) == 0 {
		for _, p := range w.procs {
			p.clock.Advance(jump)
		}
		w.tracef("lapse: every clock +%s", jump)
		return
	}
	p := w.procs[w.rng.IntN(len(w.procs))]
	p.clock.Advance(jump)
	w.tracef("lapse: %s's clock jumps +%s", p.name(), jump)
}

// drift advances one process's clock a little.
func (w *world) drift() {
	p := w.procs[w.rng.IntN(len(w.procs))]
	d := time.Duration(w.rng.IntN(3000)) * time.Millisecond
	p.clock.Advance(d)
	w.tracef("drift: %s's clock +%s", p.name(), d)
}

// claim has an idle process claim the thread with events.AcquireClaim, as
// a runner does, perhaps with a fault on the lease or the marker.
func (w *world) claim(p *proc) {
	p.claims++
	holder := fmt.Sprintf("p%d/%d", p.id, p.claims)
	op, f := "append", w.writeFault()
	if f != memstore.NoFault && w.rng.IntN(3) == 0 {
		op = "lease"
	}
	p.faults = faults{op: op, f: f}
	c, hist, err := events.AcquireClaim(w.ctx, p.store, threadID, holder, TTL, p.clock.Now())
	if p.faults.f == memstore.NoFault {
		w.countFault(f)
	}
	p.faults = faults{}
	if err != nil {
		w.tracef("%s claim -> %s", holder, short(err))
		return
	}
	w.res.Stats.Claims++
	p.core = thread.New(w.coreCf, c, hist)
	if r := p.core.View().ActiveRun; r != nil {
		w.res.Stats.Takeovers++
	}
	p.holder, p.lease = holder, c.Lease
	p.cursor = hist[len(hist)-1].Seq
	w.tracef("%s claim -> claim_seq %d, history to %d", holder, c.Seq, p.cursor)
	w.carry(p, p.core.Start())
}

// doEffect carries out the oldest pending I/O of p's core.
func (w *world) doEffect(p *proc) {
	e := p.out[0]
	p.out = p.out[1:]
	if in := w.exec(e); in != nil {
		p.inbox = append(p.inbox, in)
	}
}

// landsLate draws whether an append stays in flight past its caller's
// timeout: the caller is told the outcome is unknown, and the write lands
// (or is refused) at a later step, after reads that did not see it. A
// replicated stream does this when its leader changes with the proposal
// replicated but not yet committed. A late write is a zombie; it lands
// only once (a zombie runs once), and a retry with its msg id meanwhile
// deduplicates it.
func (w *world) landsLate(e effect) bool {
	if w.noFaults || e.late || w.rng.IntN(100) >= 4 {
		return false
	}
	e.late = true
	w.zombies = append(w.zombies, e)
	w.res.Stats.LateWrites++
	w.tracef("%s append %s %s -> in flight past its timeout (lands later, if at all)", e.by, describe(e.app.Event), describeCheck(e.app.Check))
	return true
}

// doZombie carries out an effect of a core that stopped or crashed; its
// result goes nowhere.
func (w *world) doZombie() {
	i := w.rng.IntN(len(w.zombies))
	e := w.zombies[i]
	w.zombies = append(w.zombies[:i], w.zombies[i+1:]...)
	w.exec(e)
}

// exec carries out one effect against the owner's store handle and returns
// the input that reports it.
func (w *world) exec(e effect) thread.Input {
	p := e.owner
	switch e.kind {
	case doAppend:
		if w.landsLate(e) {
			return thread.AppendDone{Err: fmt.Errorf("%w: sim: append in flight past its timeout (injected); outcome unknown", events.ErrUnavailable)}
		}
		f := w.writeFault()
		p.faults = faults{op: "append", f: f}
		ack, err := p.store.Append(w.ctx, e.app.Event, e.app.Check, events.WithMsgID(e.app.MsgID))
		p.faults = faults{}
		w.countFault(f)
		w.res.Stats.Appends++
		switch {
		case errors.Is(err, events.ErrThreadBusy):
			w.res.Stats.Fenced++
		case errors.Is(err, events.ErrConflict):
			w.res.Stats.Conflicts++
		}
		w.tracef("%s append %s %s -> %s", e.by, describe(e.app.Event), describeCheck(e.app.Check), outcome(ack, err))
		return thread.AppendDone{Ack: ack, Err: err}
	case doSync:
		last, err := events.ThreadLastSeq(w.ctx, p.store, threadID)
		if err != nil {
			w.storeFailed(e.by+"'s sync", err)
			return nil
		}
		w.tracef("%s sync -> last seq %d", e.by, last)
		return thread.Synced{LastSeq: last}
	default:
		f := w.writeFault()
		p.faults = faults{op: "append", f: f}
		// Under RUNFENCE the release expects the run subject's last
		// sequence as the core knew it (its K); on the claim layout
		// ReleaseClaimAt expects the claim's own marker, as ReleaseClaim.
		err := events.ReleaseClaimAt(w.ctx, p.store, e.claim, e.rel.RunSeq, "idle", p.clock.Now())
		p.faults = faults{}
		w.countFault(f)
		w.tracef("%s release claim %d at run seq %d -> %s", e.by, e.claim.Seq, e.rel.RunSeq, errOK(err))
		return nil
	}
}

// input feeds p's core the oldest I/O result.
func (w *world) input(p *proc) {
	in := p.inbox[0]
	p.inbox = p.inbox[1:]
	w.decide(p, in)
}

// observe delivers the next event of the log after p's cursor.
func (w *world) observe(p *proc) {
	env := w.envs[p.cursor] // sequences are 1.. with no gaps: one thread
	p.cursor = env.Seq
	w.decide(p, thread.Observed{Env: env})
}

// observeDup delivers an event p was already given again, as a redelivering
// consumer would.
func (w *world) observeDup(p *proc) {
	env := w.envs[w.rng.IntN(int(p.cursor))]
	w.res.Stats.DupObserve++
	w.decide(p, thread.Observed{Env: env})
}

// progress has the agent report on one of p's runs.
func (w *world) progress(p *proc) {
	i := w.rng.IntN(len(p.runs))
	r := p.runs[i]
	var in thread.Input
	done := false
	switch x := w.rng.IntN(100); {
	case r.cancelled || x >= 85:
		err := errors.New("agent failed")
		if r.cancelled {
			err = context.Canceled
		}
		in, done = thread.RunFinished{RunID: r.id, Err: err}, true
	case x >= 60:
		in, done = thread.RunFinished{RunID: r.id, Output: "done"}, true
	case x >= 35:
		r.asked++
		in = thread.RunAsked{RunID: r.id, RequestID: fmt.Sprintf("%s/q%d", r.id, r.asked), Question: "?"}
	case x >= 25:
		in = thread.RunSteer{RunID: r.id}
	default:
		in = thread.RunOutput{RunID: r.id, Text: "out"}
	}
	if !w.decide(p, in) || done {
		p.runs = append(p.runs[:i], p.runs[i+1:]...)
	}
}

func (w *world) tick(p *proc) { w.decide(p, thread.Tick{}) }

// drainCore asks p's core to let the thread go, as a runner that stops or
// hands the thread's partition over does: it ends what it runs, then
// releases.
func (w *world) drainCore(p *proc) {
	w.res.Stats.Drains++
	w.tracef("%s drains", p.holder)
	w.decide(p, thread.Drain{Handover: true})
}

// renew renews p's lease; a lost lease is reported to the core.
func (w *world) renew(p *proc) {
	if !w.noFaults && w.rng.IntN(10) == 0 {
		p.faults = faults{op: "lease", f: memstore.FailBefore}
	}
	l, err := p.store.RenewLease(w.ctx, p.lease)
	p.faults = faults{}
	w.tracef("%s renew lease rev %d -> %s", p.holder, p.lease.Revision, errOK(err))
	switch {
	case err == nil:
		p.lease = l
	case errors.Is(err, events.ErrLeaseLost):
		w.decide(p, thread.LeaseLost{Err: err})
	}
}

// crash kills p: its core, its runs and its queued results are gone; the
// writes it had queued are dropped or, as if already sent, still land.
func (w *world) crash(p *proc) {
	keep := w.rng.IntN(2) == 0
	w.tracef("%s crashes (in-flight writes %s)", p.holder, map[bool]string{true: "may land", false: "lost"}[keep])
	w.res.Stats.Crashes++
	if !keep {
		p.out = nil
	}
	w.stopCore(p)
}

// stopCore drops p's core. Its pending writes become zombies.
func (w *world) stopCore(p *proc) {
	w.zombies = append(w.zombies, p.out...)
	p.core, p.out, p.inbox, p.runs = nil, nil, nil, nil
}
