package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// viewCheck is a runner observer that records, before every consuming
// write, what the holder's view said: the fold's taken cursor and message
// count at the view's last sequence. After the run, each record is compared
// with the fold of the log itself up to that sequence. A view that differs
// is a bug whether or not its write landed: a stale holder's wrong view is
// refused by the fence and never shows in the audit, yet the same view in
// a live holder breaks I1.
type viewCheck struct {
	runner.NopObserver
	runner string

	mu     *sync.Mutex // protects recs and starts, shared by every runner's observer
	recs   *[]viewRec
	starts map[string]string // each claim's start, by holder
}

// viewRec is one consuming write's view.
type viewRec struct {
	runner, thread, holder string
	claim                  uint64
	typ                    events.Type
	lastSeq, taken         uint64
	messages               int
	pending                int
	seqs                   []uint64 // the view's pending messages, to name a difference
}

func (h *harness) viewObserver(runnerID string) *viewCheck {
	return &viewCheck{runner: runnerID, mu: &h.viewsMu, recs: &h.views, starts: h.starts}
}

// ClaimStarted implements [runner.StartObserver].
func (v *viewCheck) ClaimStarted(c events.Claim, snap, first, last uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.starts[c.Holder] = fmt.Sprintf("started from snapshot %d and events %d..%d", snap, first, last)
}

// Appending implements [runner.Observer].
func (v *viewCheck) Appending(c events.Claim, ev *eventspb.Event, view *projections.Thread) func(events.Ack, error) {
	switch ev.GetBody().(type) {
	case *eventspb.Event_RunStarted, *eventspb.Event_AnswerGiven, *eventspb.Event_SteeringGiven:
	default:
		return v.NopObserver.Appending(c, ev, view)
	}
	rec := viewRec{
		runner: v.runner, thread: c.Thread, holder: c.Holder, claim: c.Seq, typ: events.TypeOf(ev),
		lastSeq: view.LastSeq, taken: view.Taken, messages: view.NumMessages(), pending: len(view.Pending()),
	}
	for _, m := range view.Pending() {
		rec.seqs = append(rec.seqs, m.Seq)
	}
	v.mu.Lock()
	*v.recs = append(*v.recs, rec)
	v.mu.Unlock()
	return v.NopObserver.Appending(c, ev, view)
}

// checkViews folds each thread's log and compares it, at each recorded
// view's last sequence, with what the view said. It returns one line per
// view that differs, at most max.
func (h *harness) checkViews(envs []events.Envelope, max int) []string {
	h.viewsMu.Lock()
	defer h.viewsMu.Unlock()
	recs := slices.Clone(h.views)
	slices.SortStableFunc(recs, func(a, b viewRec) int {
		if a.thread != b.thread {
			if a.thread < b.thread {
				return -1
			}
			return 1
		}
		return int(a.lastSeq) - int(b.lastSeq)
	})
	logs := byThread(envs)
	var bad []string
	var fold *projections.Thread
	var i int // the next envelope of the thread's log to fold
	for k, r := range recs {
		if k == 0 || recs[k-1].thread != r.thread {
			fold, i = projections.New(r.thread), 0
		}
		log := logs[r.thread]
		for i < len(log) && log[i].Seq <= r.lastSeq {
			fold.Apply(log[i])
			i++
		}
		if fold.Taken != r.taken || fold.NumMessages() != r.messages || len(fold.Pending()) != r.pending {
			var want []uint64
			for _, m := range fold.Pending() {
				want = append(want, m.Seq)
			}
			line := fmt.Sprintf("%s by %s (holder %s, claim %d, %s) on %s: its view at %d had taken %d, %d messages, pending %v; the log's fold there has taken %d, %d messages, pending %v",
				r.typ, r.runner, r.holder, r.claim, h.starts[r.holder], r.thread, r.lastSeq, r.taken, r.messages, r.seqs, fold.Taken, fold.NumMessages(), want)
			if slices.ContainsFunc(bad, func(b string) bool { return strings.HasPrefix(b, line) }) {
				continue // a resend of the same write
			}
			if len(bad) < 3 {
				line += "\nthe thread's events:\n" + strings.Join(around(envs, r.thread, r.lastSeq+8, 40), "\n")
				line += "\nthe holder's logs:\n" + strings.Join(h.lc.latest(40, "runner="+r.runner+" ", "thread="+r.thread+" "), "\n")
			}
			bad = append(bad, line)
			if len(bad) == max {
				break
			}
		}
	}
	return bad
}
