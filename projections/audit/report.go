package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/events"
)

// The checks, named as the spec's invariants (spec/ThreadClaimLapse.tla) and
// DESIGN §5's audit checks.
const (
	// CheckI1 (I1_ConsumedAtMostOnce): a message is consumed at most once by
	// any mix of run_started, answer_given and steering_given.
	CheckI1 = "I1_ConsumedAtMostOnce"
	// CheckI3 (I3_OneActiveRun): no run starts while another is active in
	// its thread.
	CheckI3 = "I3_OneActiveRun"
	// CheckFence (FenceNewestClaim): every fenced event carries the newest
	// claim marker before it as claim_seq, with that claim's holder, appended
	// with the fence headers (with markers on the run subject: a
	// compare-and-set on the run subject), and its claim not released.
	CheckFence = "FenceNewestClaim"
	// CheckClaimChain (ClaimChain): each thread_claimed and thread_released
	// expects the previous sequence on its thread's claim subject (on its
	// run subject when the markers are there): an unbroken compare-and-set
	// chain.
	CheckClaimChain = "ClaimChain"
	// CheckNoEndAfterAbandon (NoEndAfterAbandon): no run_output,
	// request_opened, run_completed or run_failed of a run after it was
	// abandoned.
	CheckNoEndAfterAbandon = "NoEndAfterAbandon"
	// CheckAnswerOnce (AnswerOnce): no request is answered twice.
	CheckAnswerOnce = "AnswerOnce"
	// CheckRunChain (RunChain): each run_output, request_opened,
	// run_completed and run_failed was appended with a compare-and-set on
	// its thread's run subject: it expects the previous sequence there. A
	// write with no check is one no honest holder makes, such as a forged
	// run_completed published without headers. With markers on the run
	// subject, one of a claim older than the newest marker, or released,
	// is one too.
	CheckRunChain = "RunChain"
	// CheckRejectOnlyIdle (RejectOnlyIdle, the guard of the spec's PostIdle):
	// a post whose strategy is reject lands only while no run is active in
	// its thread. Its check on the run subject makes that atomic; a post
	// that skipped the check and landed during a run breaks it.
	CheckRejectOnlyIdle = "RejectOnlyIdle"
	// CheckNoneSkipped (NoneSkipped): a run_started, answer_given or
	// steering_given consumes the oldest pending message of its thread, so
	// none is passed over.
	CheckNoneSkipped = "NoneSkipped"
	// CheckRunByHolder (RunByHolder; the spec's Ask and RunEnd are the
	// holder's steps for its own run): each run_output, request_opened,
	// run_interrupted, run_completed and run_failed is of the active run,
	// written under the claim the run started under by the holder that
	// started it. An event of a run that never started or already ended (a
	// run ends once), or by another writer (one with no claim marker, its
	// claim_seq 0, included), breaks it. An event of an abandoned run is
	// NoEndAfterAbandon's.
	CheckRunByHolder = "RunByHolder"
	// CheckReleaseByHolder (ReleaseByHolder, the spec's Release): each
	// thread_released releases the newest claim, not yet released, and
	// names that claim's holder.
	CheckReleaseByHolder = "ReleaseByHolder"
	// CheckGivenToActive (GivenToActive; the spec's Reply answers an open
	// request of the active run, Steer steers it): each answer_given
	// answers a request the active run opened, and each steering_given
	// names the active run. Such an event still consumes its message.
	CheckGivenToActive = "GivenToActive"
	// CheckAbandonOnlyOlder (AbandonOnlyOlder; the spec's Abandon abandons
	// the active run an older claim started): each run_abandoned names the
	// active run, started under a claim older than the newest, and its
	// started_claim_seq is that claim; or it names the run that ended last
	// while none is active (its end beat the abandon: nothing to undo). An
	// abandon of a run started under the newest claim, the abandoner's own,
	// breaks it: the log shows a run_started its holder did not write, or
	// a holder that abandons its own run.
	CheckAbandonOnlyOlder = "AbandonOnlyOlder"
)

// CheckNames lists the checks in the order reports print them.
var CheckNames = []string{CheckI1, CheckI3, CheckFence, CheckClaimChain, CheckNoEndAfterAbandon, CheckAnswerOnce, CheckRunChain, CheckRejectOnlyIdle,
	CheckNoneSkipped, CheckRunByHolder, CheckReleaseByHolder, CheckGivenToActive, CheckAbandonOnlyOlder}

// check indexes the per-check counters, in CheckNames order.
type check int

const (
	checkI1 check = iota
	checkI3
	checkFence
	checkClaimChain
	checkNoEndAfterAbandon
	checkAnswerOnce
	checkRunChain
	checkRejectOnlyIdle
	checkNoneSkipped
	checkRunByHolder
	checkReleaseByHolder
	checkGivenToActive
	checkAbandonOnlyOlder
	numChecks
)

// Report is the outcome of an audit. Its JSON form is documented in the
// package doc.
type Report struct {
	Events   int    `json:"events"`    // envelopes audited
	Threads  int    `json:"threads"`   // distinct valid thread ids seen
	FirstSeq uint64 `json:"first_seq"` // lowest stream sequence audited
	LastSeq  uint64 `json:"last_seq"`  // highest stream sequence audited

	// Violations break a check; Anomalies are events that are malformed or
	// contradict the state without breaking one. Both are in stream order
	// and hold at most Options.MaxFindings entries each; the counts are the
	// totals.
	Violations     []Violation `json:"violations"`
	Anomalies      []Finding   `json:"anomalies"`
	ViolationCount int         `json:"violation_count"`
	AnomalyCount   int         `json:"anomaly_count"`

	// Checks counts, by check name, the events each check examined.
	Checks map[string]int `json:"checks"`

	// Stranded are warnings, not violations: threads with a message
	// pending, no active run and no claim for longer than
	// Options.StrandedAfter, oldest first (at most Options.MaxFindings);
	// StrandedCount is their total. Empty unless StrandedAfter is set.
	Stranded      []Stranded `json:"stranded,omitempty"`
	StrandedCount int        `json:"stranded_count"`
}

// Stranded is a thread nobody works on although it has a message to answer.
type Stranded struct {
	Thread string `json:"thread"`
	// Since is the stored time of the event since which it has been so:
	// its newest claim's release, or the post that found it unclaimed.
	Since      time.Time `json:"since"`
	Pending    int       `json:"pending"`     // messages not yet taken
	OldestSeq  uint64    `json:"oldest_seq"`  // the oldest of them
	ReleaseSeq uint64    `json:"release_seq"` // its newest claim's thread_released, 0 when never claimed
}

// Violation is an event that breaks a check.
type Violation struct {
	Check  string `json:"check"`  // one of CheckNames
	Thread string `json:"thread"` // thread id
	// Seqs are the stream sequences involved, ascending where they are
	// known to be; the last is the violating event.
	Seqs    []uint64 `json:"seqs"`
	Message string   `json:"message"` // one sentence
}

// Finding is an anomaly: an event that is malformed or contradicts the
// thread's state, without breaking a check.
type Finding struct {
	Thread  string      `json:"thread"` // "" when the subject names none
	Seq     uint64      `json:"seq"`
	Type    events.Type `json:"type"` // the type header or body, "" when unknown
	Message string      `json:"message"`
	// Ignored says the fold applied nothing of the event: it is malformed,
	// of another thread, out of order, a repost (no message), or a
	// thread_forked that cannot start the thread. Not in the JSON.
	Ignored bool `json:"-"`
}

// OK reports whether the audit found no violation. Anomalies alone do not
// fail an audit: they are not breaches of the invariants.
func (r Report) OK() bool { return r.ViolationCount == 0 && len(r.Violations) == 0 }

// MarshalJSON adds "ok" to the report's fields.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report // drops the methods, so no recursion
	return json.Marshal(struct {
		OK bool `json:"ok"`
		plain
	}{r.OK(), plain(r)})
}

// WriteText writes a summary line, the events each check examined, then each
// violation (check, thread, seqs, one sentence), then each anomaly.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	verdict := "OK"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "audit %s: %d events (seq %d..%d) in %d threads, %d violations, %d anomalies\n",
		verdict, r.Events, r.FirstSeq, r.LastSeq, r.Threads, r.ViolationCount, r.AnomalyCount)
	b.WriteString("checks:")
	for _, name := range CheckNames {
		fmt.Fprintf(&b, " %s=%d", name, r.Checks[name])
	}
	b.WriteString("\n")
	if len(r.Violations) > 0 {
		b.WriteString("violations:\n")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "  %s thread %s seqs %s: %s\n", v.Check, v.Thread, joinSeqs(v.Seqs), v.Message)
		}
		if n := r.ViolationCount - len(r.Violations); n > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", n)
		}
	}
	if len(r.Stranded) > 0 {
		fmt.Fprintf(&b, "warnings: %d threads stranded (a message pending, no run, no claim; not a violation):\n", r.StrandedCount)
		for _, st := range r.Stranded {
			fmt.Fprintf(&b, "  thread %s: %d pending from seq %d, unclaimed since %s (release seq %d)\n",
				st.Thread, st.Pending, st.OldestSeq, st.Since.Format(time.RFC3339Nano), st.ReleaseSeq)
		}
		if n := r.StrandedCount - len(r.Stranded); n > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", n)
		}
	}
	if len(r.Anomalies) > 0 {
		b.WriteString("anomalies:\n")
		for _, a := range r.Anomalies {
			fmt.Fprintf(&b, "  thread %s seq %d (%s): %s\n", a.Thread, a.Seq, orUnknown(a.Type), a.Message)
		}
		if n := r.AnomalyCount - len(r.Anomalies); n > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func joinSeqs(seqs []uint64) string {
	var b []byte
	for i, s := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, s, 10)
	}
	return string(b)
}

func orUnknown(t events.Type) string {
	if t == "" {
		return "unknown type"
	}
	return string(t)
}
