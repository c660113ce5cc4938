package console

import (
	"sync"
	"time"
)

// What refused a write ([Refusal.By]).
const (
	ByFence = "fence"           // a newer claim marker holds the thread
	ByCAS   = "compare-and-set" // the run subject moved on
)

// TypeTakeover is the [Refusal.Type] of a takeover this runner made: not a
// refusal, but kept beside them for the runners page.
const TypeTakeover = "takeover"

// Refusal is one write of this process's runner that JetStream refused:
// the fence (a newer claim marker) or a run-subject compare-and-set.
type Refusal struct {
	// Seq numbers the records of this process from 1, across the ring's
	// wrap, so a reader can tell what it has seen and what it lost.
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Thread   string    `json:"thread"`
	Holder   string    `json:"holder"`
	ClaimSeq uint64    `json:"claim_seq"`
	Type     string    `json:"type"`         // the refused event's type, or TypeTakeover
	By       string    `json:"by,omitempty"` // ByFence or ByCAS
	Reason   string    `json:"reason"`       // what refused it, in words
}

// maxLostThreads bounds the threads whose dropped refusals Recent
// remembers by name; past it, it remembers only a sequence below which any
// thread may have lost some.
const maxLostThreads = 4096

// Recent keeps the last refusals of this process's runner, for the
// console: a fixed-size ring, so its cost does not grow with threads or
// time. The log itself never holds a refused write, so what falls out of
// the ring is gone; Recent remembers which threads lost some, so a reader
// is told rather than left to miss them.
type Recent struct {
	mu   sync.Mutex // protects the following fields
	ring []Refusal
	seq  uint64 // the last Seq given
	// lost is, for each thread that had refusals dropped from the ring,
	// the Seq of the newest dropped; lostAll is a Seq at or below which
	// any thread may have lost some (lost overflowed).
	lost    map[string]uint64
	lostAll uint64
	subs    map[chan struct{}]struct{}
}

// NewRecent returns a ring of the last n refusals.
func NewRecent(n int) *Recent {
	return &Recent{ring: make([]Refusal, max(n, 1)), lost: map[string]uint64{}, subs: map[chan struct{}]struct{}{}}
}

// Add numbers r, records it and wakes the subscribers. It never blocks.
func (rc *Recent) Add(r Refusal) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.seq++
	r.Seq = rc.seq
	slot := &rc.ring[(rc.seq-1)%uint64(len(rc.ring))]
	if old := *slot; old.Seq != 0 {
		rc.drop(old)
	}
	*slot = r
	for c := range rc.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// drop notes that old left the ring. Called with mu held.
func (rc *Recent) drop(old Refusal) {
	if old.Type == TypeTakeover {
		return // the log has every takeover; only refusals are lost
	}
	if _, ok := rc.lost[old.Thread]; !ok && len(rc.lost) >= maxLostThreads {
		for _, s := range rc.lost {
			rc.lostAll = max(rc.lostAll, s)
		}
		clear(rc.lost)
	}
	rc.lost[old.Thread] = old.Seq
}

// All returns the refusals kept, oldest first.
func (rc *Recent) All() []Refusal {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.kept()
}

func (rc *Recent) kept() []Refusal {
	n := uint64(len(rc.ring))
	first := uint64(1)
	if rc.seq > n {
		first = rc.seq - n + 1
	}
	out := make([]Refusal, 0, rc.seq-first+1)
	for s := first; s <= rc.seq; s++ {
		out = append(out, rc.ring[(s-1)%n])
	}
	return out
}

// Since is what a reader that has seen thread's records up to Seq after
// (0 for none) has not seen yet.
type Since struct {
	// Refusals are thread's records after after, oldest first.
	Refusals []Refusal
	// Next is the Seq to read from next: the newest Seq given so far.
	Next uint64
	// Lost is the Seq of the newest record of thread after after that
	// left the ring unread (possibly of thread, when Recent no longer
	// knows), or 0 if none did.
	Lost uint64
}

// Since returns thread's records after Seq after, and whether any left
// the ring before the reader saw them.
func (rc *Recent) Since(thread string, after uint64) Since {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s := Since{Next: rc.seq}
	if l := max(rc.lost[thread], rc.lostAll); l > after {
		s.Lost = l
	}
	for _, r := range rc.kept() {
		if r.Seq > after && r.Thread == thread {
			s.Refusals = append(s.Refusals, r)
		}
	}
	return s
}

// Subscribe returns a channel woken after each Add (coalesced), and a func
// that unsubscribes.
func (rc *Recent) Subscribe() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	rc.mu.Lock()
	rc.subs[c] = struct{}{}
	rc.mu.Unlock()
	return c, func() {
		rc.mu.Lock()
		delete(rc.subs, c)
		rc.mu.Unlock()
	}
}
