package projections

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// A compact Thread is the bounded view a claim's holder keeps (DESIGN §10):
// what the fold's decisions need and nothing of the conversation. After
// [Thread.Compact] the fold makes the same decisions as the whole fold of
// the same log (the same taken cursor, the same pending messages, the same
// active run and open requests, the same subject sequences), while it
// holds:
//
//   - the pending messages only: every message at or before the taken
//     cursor is forgotten, and a consuming event naming one is refused as
//     [MsgTaken] (the whole fold refuses it as consumed or not posted);
//   - the newest run only, which is the active run when one is, without
//     its outputs' texts or steering;
//   - the active run's requests only;
//   - the newest [RecentWindow] messages' sequences ([Thread.Recent]), so
//     that a run's history can be read from the log without a search;
//   - the message ids the store's index does not answer for, as 16-byte
//     fingerprints, so that a repost is never a message however old its
//     id. A post the index resolved (events.FirstPosts, the envelope's
//     FirstPost) costs nothing here: the index answers for its id later.
//     The ids kept are those of posts folded unresolved (a store with no
//     index, a snapshot of before it) and those whose index entry a
//     forger wrote first, which the index cannot answer for;
//   - the newest [compactAnomalies] anomalies.
//
// Reposts are not recorded: a consuming event naming one is refused as
// not posted, or as taken, rather than as a repost.
type compactState struct {
	on  bool
	ids idSet
	// dropped counts the messages forgotten: [Thread.NumMessages] is the
	// whole fold's len(Messages).
	dropped int
	// expanded says ids holds the ids of a compact view that was expanded
	// ([Thread.Expand]): later ones are in Thread.ids.
	expanded bool
}

// RecentWindow is how many of the newest messages' sequences a compact
// Thread keeps in Recent.
const RecentWindow = 256

// compactAnomalies is how many anomalies a compact Thread keeps: its
// holder logged each as it saw it, and the audit reads the log.
const compactAnomalies = 16

// Compact makes t a bounded view and forgets what no decision needs (see
// the comment on compactState). It costs the number of messages and runs it
// forgets, so calling it after every event is cheap. Once compact, t stays
// compact: later events are folded into the bounded state.
func (t *Thread) Compact() {
	if !t.compact.on {
		t.compact.on = true
		for id := range t.ids {
			if _, ok := t.backed[id]; !ok {
				t.compact.ids.add(fingerprint(id))
			}
		}
		t.ids, t.backed = nil, nil
		for _, m := range t.Messages {
			if m.Consumed == nil || m.Consumed.Kind != ConsumedForked {
				t.pushRecent(m.Seq)
			}
		}
	}
	t.Reposts = nil
	if i := t.pendingIndex(); i > 0 {
		t.compact.dropped += i
		n := copy(t.Messages, t.Messages[i:])
		clear(t.Messages[n:])
		t.Messages = t.Messages[:n]
		if cap(t.Messages) > 4*n+16 {
			t.Messages = slices.Clip(slices.Clone(t.Messages))
		}
		t.next = 0
	}
	if n := len(t.Runs); n > 1 {
		t.Runs = []*Run{t.Runs[n-1]}
	}
	if n := len(t.Runs); n == 1 {
		r := t.Runs[0]
		r.Outputs, r.Output, r.Steering = nil, "", nil
	}
	for id, q := range t.Requests {
		if q.Closed || t.ActiveRun == nil || q.RunID != t.ActiveRun.ID {
			delete(t.Requests, id)
		}
	}
	if n := len(t.Anomalies); n > compactAnomalies {
		t.Anomalies = slices.Clone(t.Anomalies[n-compactAnomalies:])
	}
}

// Expand makes a compact t fold the conversation again from here on: later
// messages, outputs and runs are kept whole, while what it forgot stays
// forgotten. It still knows every earlier message id, by fingerprint. A
// reader that starts from a runner's compact snapshot to follow what comes
// next (client.Wait) expands it first.
func (t *Thread) Expand() {
	if t.compact.on {
		t.compact.on = false
		t.compact.expanded = true
	}
}

// RememberID makes t remember message id id itself, as it does an id
// folded unresolved: for an id the store's first-post index turned out
// not to answer for (a forger wrote its entry first), or one whose entry
// is not written yet when t is saved.
func (t *Thread) RememberID(id string) {
	if t.compact.on {
		if f := fingerprint(id); !t.compact.ids.has(f) {
			t.compact.ids.add(f)
		}
		return
	}
	delete(t.backed, id)
}

// Compacted reports whether t is a bounded view ([Thread.Compact]).
func (t *Thread) Compacted() bool { return t.compact.on }

// NumMessages returns how many messages the thread has: len(Messages) for
// the whole fold, and as many for a compact one, which holds fewer.
func (t *Thread) NumMessages() int { return t.compact.dropped + len(t.Messages) }

// RecentBefore returns the sequences of the newest n messages before seq
// that t knows, oldest first: for a compact Thread, from Recent (at most
// [RecentWindow]); for a whole fold, from Messages.
func (t *Thread) RecentBefore(seq uint64, n int) []uint64 {
	var all []uint64
	if t.compact.on {
		all = t.Recent
	} else {
		for _, m := range t.Messages {
			if m.Consumed == nil || m.Consumed.Kind != ConsumedForked {
				all = append(all, m.Seq)
			}
		}
	}
	i, _ := slices.BinarySearch(all, seq)
	return slices.Clone(all[max(0, i-n):i])
}

func (t *Thread) pushRecent(seq uint64) {
	if len(t.Recent) >= 2*RecentWindow {
		t.Recent = append(t.Recent[:0], t.Recent[len(t.Recent)-RecentWindow+1:]...)
	}
	t.Recent = append(t.Recent, seq)
}

// fp is a message id's fingerprint: the first 16 bytes of its SHA-256.
// Two ids share one only by a collision of SHA-256 cut to 128 bits, which
// takes about 2^64 tries to find even on purpose (the store trusts the
// same cut for a post's digest); ids from a hostile client therefore
// cannot make another client's new message a repost, and a reused id is
// always found.
type fp [2]uint64

func fingerprint(id string) fp {
	s := sha256.Sum256([]byte(id))
	return fp{binary.BigEndian.Uint64(s[:8]), binary.BigEndian.Uint64(s[8:16])}
}

func cmpFP(a, b fp) int {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return cmp.Compare(a[1], b[1])
}

// idSet is a set of fingerprints in 16 bytes each: a sorted slice, sized
// exactly, and up to idMerge recent ones unsorted, merged into it when
// full. A lookup is a binary search and a scan of idMerge; an add costs a
// merge, O(n), every idMerge adds.
type idSet struct {
	sorted []fp
	recent []fp
}

const idMerge = 256

func (s *idSet) has(f fp) bool {
	if _, ok := slices.BinarySearchFunc(s.sorted, f, cmpFP); ok {
		return true
	}
	return slices.Contains(s.recent, f)
}

func (s *idSet) add(f fp) {
	if s.recent == nil {
		s.recent = make([]fp, 0, idMerge)
	}
	s.recent = append(s.recent, f)
	if len(s.recent) == idMerge {
		s.merge()
	}
}

// merge moves the recent fingerprints into sorted.
func (s *idSet) merge() {
	if len(s.recent) == 0 {
		return
	}
	slices.SortFunc(s.recent, cmpFP)
	out := make([]fp, 0, len(s.sorted)+len(s.recent))
	i, j := 0, 0
	for i < len(s.sorted) || j < len(s.recent) {
		switch {
		case j == len(s.recent) || i < len(s.sorted) && cmpFP(s.sorted[i], s.recent[j]) <= 0:
			out = append(out, s.sorted[i])
			i++
		default:
			out = append(out, s.recent[j])
			j++
		}
	}
	s.sorted = slices.CompactFunc(out, func(a, b fp) bool { return a == b })
	s.recent = s.recent[:0]
}

func (s *idSet) len() int { return len(s.sorted) + len(s.recent) }

func (s *idSet) clone() idSet {
	c := idSet{sorted: slices.Clone(s.sorted)}
	if s.recent != nil {
		c.recent = append(make([]fp, 0, idMerge), s.recent...)
	}
	return c
}

// bytes returns the set as sorted 16-byte big-endian fingerprints.
func (s *idSet) bytes() []byte {
	s.merge()
	b := make([]byte, 0, 16*len(s.sorted))
	for _, f := range s.sorted {
		b = binary.BigEndian.AppendUint64(b, f[0])
		b = binary.BigEndian.AppendUint64(b, f[1])
	}
	return b
}

// idSetOf decodes [idSet.bytes].
func idSetOf(b []byte) (idSet, error) {
	if len(b)%16 != 0 {
		return idSet{}, fmt.Errorf("message id fingerprints of %d bytes, not a multiple of 16", len(b))
	}
	s := idSet{sorted: make([]fp, len(b)/16)}
	for i := range s.sorted {
		s.sorted[i] = fp{binary.BigEndian.Uint64(b[16*i:]), binary.BigEndian.Uint64(b[16*i+8:])}
		if i > 0 && cmpFP(s.sorted[i-1], s.sorted[i]) >= 0 {
			return idSet{}, fmt.Errorf("message id fingerprints out of order at %d", i)
		}
	}
	return s, nil
}
