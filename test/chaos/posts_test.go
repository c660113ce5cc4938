package chaos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/sys"
)

// postLog records every acknowledged post: the checks require each one in
// the log exactly once, consumed exactly once.
type postLog struct {
	next atomic.Int64

	mu      sync.Mutex                   // protects acked and refused
	acked   map[string]map[string]uint64 // thread -> message id -> sequence
	refused map[string]map[string]bool   // thread -> message ids refused with nothing written
}

// refuse notes a post refused with nothing written (busy under reject):
// the checks require its id absent from the log.
func (p *postLog) refuse(thread, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.refused[thread]
	if m == nil {
		m = map[string]bool{}
		p.refused[thread] = m
	}
	m[id] = true
}

func (p *postLog) refusedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.refused {
		n += len(m)
	}
	return n
}

// record notes an ack; a second ack of one id with another sequence means
// the deduplication broke.
func (p *postLog) record(thread, id string, seq uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.acked[thread]
	if m == nil {
		m = map[string]uint64{}
		p.acked[thread] = m
	}
	if old, ok := m[id]; ok && old != seq {
		return fmt.Errorf("message %s on %s acked as seq %d and as seq %d", id, thread, old, seq)
	}
	m[id] = seq
	return nil
}

func (p *postLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.acked {
		n += len(m)
	}
	return n
}

// post posts until it gets an ack, retrying an unknown outcome with the same
// message id, as a client must. It gives up after a minute; a post that
// landed without an ack is still checked, as part of the log.
func (h *harness) post(s events.Store, thread, id, text string) (events.Ack, bool) {
	return h.postStrategy(s, thread, id, text, "")
}

// postStrategy is post with the message's strategy named ("" for the
// thread's).
func (h *harness) postStrategy(s events.Store, thread, id, text, strategy string) (events.Ack, bool) {
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ack, err := s.Post(ctx, thread, &eventspb.MessagePosted{MessageId: id, Author: "chaos", Text: text, Strategy: strategy})
		cancel()
		if err == nil {
			if err := h.posts.record(thread, id, ack.Seq); err != nil {
				h.t.Errorf("dedupe: %v", err)
			}
			return ack, true
		}
		h.stats.add("post:retried_after_error", 1)
		if time.Now().After(deadline) {
			h.stats.add("post:gave_up", 1)
			h.t.Logf("post %s to %s: gave up: %v", id, thread, err)
			return events.Ack{}, false
		}
		time.Sleep(100 * time.Millisecond) // back off; the store already retried
	}
}

// repost posts id again, as a client retrying a post whose ack it lost: the
// store must answer with the original sequence, marked duplicate.
func (h *harness) repost(s events.Store, thread, id, text string, seq uint64) {
	ack, ok := h.post(s, thread, id, text)
	switch {
	case !ok:
	case !ack.Duplicate || ack.Seq != seq:
		h.t.Errorf("dedupe: repost of %s on %s got seq %d duplicate=%v; want the original seq %d, duplicate", id, thread, ack.Seq, ack.Duplicate, seq)
	default:
		h.stats.add("post:duplicate_ack", 1)
	}
}

// text draws a prompt: mostly plain, some asks (answered by a later post),
// a few that make the run fail.
func (h *harness) text(id string) string {
	switch h.rng.pick(80, 15, 5) {
	case 1:
		return "ask: q-" + id + "?"
	case 2:
		return "fail: f-" + id
	}
	return "hello " + id
}

type retry struct {
	due              time.Time
	thread, id, text string
	seq              uint64
}

// postLoop posts to random threads until ctx ends, with duplicates at once
// and retries a little later.
func (h *harness) postLoop(ctx context.Context, s events.Store) {
	var retries []retry
	for sys.Sleep(ctx, h.rng.dur(h.cfg.postGap)) {
		for len(retries) > 0 && time.Now().After(retries[0].due) {
			r := retries[0]
			retries = retries[1:]
			h.repost(s, r.thread, r.id, r.text, r.seq)
		}
		th := h.threads[h.rng.intN(len(h.threads))]
		id := fmt.Sprintf("m%06d", h.posts.next.Add(1))
		text := h.text(id)
		ack, ok := h.post(s, th, id, text)
		if !ok {
			continue
		}
		h.stats.add("post:acked", 1)
		if h.rng.chance(h.cfg.pDupPost) {
			h.faults.add("post_duplicate", 1)
			h.repost(s, th, id, text, ack.Seq)
		}
		if h.rng.chance(h.cfg.pRetryPost) {
			h.faults.add("post_retried_later", 1)
			due := time.Now().Add(h.rng.dur([2]time.Duration{100 * time.Millisecond, 3 * time.Second}))
			retries = append(retries, retry{due: due, thread: th, id: id, text: text, seq: ack.Seq})
		}
	}
}
