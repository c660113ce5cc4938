package projections

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/artifactr/artifactr/events"
)

// snapshotVersion is the version of the snapshot encoding of a whole fold;
// compactVersion that of a compact one ([Thread.Compact]), which a reader
// that knows only version 1 must not take for a whole fold: it would lack
// the message ids. A snapshot of another version is not trusted, only
// replaced.
//
// Version 3 is a compact one that keeps only the ids the store's index does
// not answer for (events.FirstPosts): a reader that knows only version 2
// would take a repost of any other id for a message, so it must not read
// it. Version 2 is still read: it keeps every id, which is never wrong.
const (
	snapshotVersion   = 1
	compactVersionAll = 2
	compactVersion    = 3
)

// ErrBadSnapshot is returned by [DecodeSnapshot] for a snapshot that does not
// verify: it is ignored, and the thread is folded from its log instead.
var ErrBadSnapshot = errors.New("projections: bad snapshot")

// snapshot is the stored form of a thread's fold at a sequence: the state,
// and a digest of it that the reader checks.
type snapshot struct {
	Version int             `json:"v"`
	Thread  string          `json:"thread"`
	Seq     uint64          `json:"seq"`
	State   json.RawMessage `json:"state"`
	Digest  string          `json:"sha256"`
}

// threadState is a Thread as stored. ActiveRun is an index into Runs, so
// that it points into them again once decoded.
type threadState struct {
	Messages            []Message                  `json:"messages"`
	Taken               uint64                     `json:"taken"`
	Claim               Claim                      `json:"claim"`
	LastClaimSubjectSeq uint64                     `json:"last_claim_seq"`
	LastRunSubjectSeq   uint64                     `json:"last_run_seq"`
	Runs                []*Run                     `json:"runs"`
	ActiveRun           int                        `json:"active_run"` // -1: none
	Requests            map[string]*Request        `json:"requests"`
	Anomalies           []Anomaly                  `json:"anomalies"`
	LastActivity        time.Time                  `json:"last_activity"`
	Fork                *Fork                      `json:"fork,omitempty"`
	Strategy            events.Strategy            `json:"strategy,omitempty"`
	LastPostedSubjSeq   uint64                     `json:"last_posted_seq,omitempty"`
	Created             time.Time                  `json:"created,omitzero"`
	Metadata            map[string]json.RawMessage `json:"metadata,omitempty"`
	DeletedSeq          uint64                     `json:"deleted_seq,omitempty"`
	Reposts             map[uint64]uint64          `json:"reposts,omitempty"`
	// A compact Thread's: its message ids' fingerprints (16 bytes each,
	// sorted), its newest messages' sequences, and how many messages it
	// forgot.
	IDs     []byte   `json:"ids,omitempty"`
	Recent  []uint64 `json:"recent,omitempty"`
	Dropped int      `json:"dropped,omitempty"`
}

// EncodeSnapshot returns t's state as a snapshot at t.LastSeq. Loading it
// with [DecodeSnapshot] and applying the events after t.LastSeq gives the
// same state as folding the whole log.
func (t *Thread) EncodeSnapshot() ([]byte, error) {
	st := threadState{
		Messages: t.Messages, Taken: t.Taken, Claim: t.Claim,
		LastClaimSubjectSeq: t.LastClaimSubjectSeq, LastRunSubjectSeq: t.LastRunSubjectSeq,
		Runs: t.Runs, ActiveRun: -1, Requests: t.Requests, Anomalies: t.Anomalies,
		LastActivity: t.LastActivity, Fork: t.Fork,
		Strategy: t.Strategy, LastPostedSubjSeq: t.LastPostedSubjectSeq,
		Created: t.Created, Metadata: t.Metadata, DeletedSeq: t.DeletedSeq,
		Reposts: t.Reposts,
	}
	version := snapshotVersion
	if t.compact.on {
		version = compactVersion
		st.IDs, st.Recent, st.Dropped = t.compact.ids.bytes(), t.Recent, t.compact.dropped
	}
	for i, r := range t.Runs {
		if r == t.ActiveRun {
			st.ActiveRun = i
		}
	}
	if t.ActiveRun != nil && st.ActiveRun < 0 {
		return nil, fmt.Errorf("projections: snapshot of %s: the active run is not among its runs", t.ID)
	}
	state, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("projections: snapshot of %s: %w", t.ID, err)
	}
	sum := sha256.Sum256(state)
	return json.Marshal(snapshot{Version: version, Thread: t.ID, Seq: t.LastSeq, State: state, Digest: hex.EncodeToString(sum[:])})
}

// DecodeSnapshot returns the state a snapshot of thread holds. It returns an
// error wrapping [ErrBadSnapshot] when the snapshot does not verify: another
// version or thread, a digest that does not match, or a state that breaks
// the fold's own rules (messages out of order or past the snapshot's
// sequence, an active run that is not active). The digest catches damage,
// not forgery: only the runners may write snapshots (their permissions),
// as only they may write the log's claim and run subjects.
func DecodeSnapshot(thread string, data []byte) (*Thread, error) {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	switch {
	case s.Version != snapshotVersion && s.Version != compactVersion && s.Version != compactVersionAll:
		return nil, fmt.Errorf("%w: version %d, want %d, %d or %d", ErrBadSnapshot, s.Version, snapshotVersion, compactVersionAll, compactVersion)
	case s.Thread != thread:
		return nil, fmt.Errorf("%w: of thread %q, not %q", ErrBadSnapshot, s.Thread, thread)
	case s.Seq == 0:
		return nil, fmt.Errorf("%w: at sequence 0", ErrBadSnapshot)
	}
	sum := sha256.Sum256(s.State)
	if hex.EncodeToString(sum[:]) != s.Digest {
		return nil, fmt.Errorf("%w: digest does not match its state", ErrBadSnapshot)
	}
	var st threadState
	if err := json.Unmarshal(s.State, &st); err != nil {
		return nil, fmt.Errorf("%w: state: %v", ErrBadSnapshot, err)
	}
	t := New(thread)
	t.LastSeq = s.Seq
	t.Messages, t.Taken, t.Claim = st.Messages, st.Taken, st.Claim
	t.LastClaimSubjectSeq, t.LastRunSubjectSeq = st.LastClaimSubjectSeq, st.LastRunSubjectSeq
	t.Runs, t.Anomalies, t.LastActivity = st.Runs, st.Anomalies, st.LastActivity
	t.Fork = st.Fork
	t.Strategy, t.LastPostedSubjectSeq = st.Strategy, st.LastPostedSubjSeq
	t.Created, t.Metadata, t.DeletedSeq = st.Created, st.Metadata, st.DeletedSeq
	t.Reposts = st.Reposts
	if s.Version == compactVersion || s.Version == compactVersionAll {
		ids, err := idSetOf(st.IDs)
		if err != nil || st.Dropped < 0 || !slices.IsSorted(st.Recent) {
			return nil, fmt.Errorf("%w: compact state: ids %v, %d dropped, recent sorted %v", ErrBadSnapshot, err, st.Dropped, slices.IsSorted(st.Recent))
		}
		t.compact = compactState{on: true, ids: ids, dropped: st.Dropped}
		t.Recent = st.Recent
	} else {
		t.indexIDs()
	}
	if st.Requests != nil {
		t.Requests = st.Requests
	}
	if err := t.checkSnapshot(st.ActiveRun); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if st.ActiveRun >= 0 {
		t.ActiveRun = t.Runs[st.ActiveRun]
	}
	return t, nil
}

// checkSnapshot checks what the fold relies on: messages in increasing
// order and none past the snapshot, the taken cursor on a message, and the
// active run, if any, an active run.
func (t *Thread) checkSnapshot(active int) error {
	var prev uint64
	for _, m := range t.Messages {
		if m.Seq <= prev || m.Seq > t.LastSeq {
			return fmt.Errorf("message at %d out of order or past %d", m.Seq, t.LastSeq)
		}
		prev = m.Seq
	}
	if t.Taken > t.LastSeq || t.Claim.Seq > t.LastSeq || t.LastClaimSubjectSeq > t.LastSeq || t.LastRunSubjectSeq > t.LastSeq {
		return fmt.Errorf("a cursor past the snapshot's sequence %d", t.LastSeq)
	}
	for i, r := range t.Runs {
		if r == nil {
			return fmt.Errorf("run %d is null", i)
		}
	}
	for id, q := range t.Requests {
		if q == nil {
			return fmt.Errorf("request %q is null", id)
		}
	}
	if active >= len(t.Runs) || active < -1 {
		return fmt.Errorf("active run %d of %d runs", active, len(t.Runs))
	}
	if active >= 0 && t.Runs[active].Status != RunActive {
		return fmt.Errorf("active run %s has status %s", t.Runs[active].ID, t.Runs[active].Status)
	}
	return nil
}
