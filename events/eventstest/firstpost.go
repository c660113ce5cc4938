package eventstest

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// FirstPostHarness opens a store with a first-post index
// ([events.FirstPosts]) and writes entries as a forger would.
type FirstPostHarness struct {
	Harness
	// Forge writes (thread, id)'s entry naming seq, as a writer with a
	// runner's credentials could, unless there is one.
	Forge func(t *testing.T, thread, id string, seq uint64)
}

// RunFirstPosts runs the first-post index's contract: a first post names
// itself, for good; a repost resolves to the first post, however late;
// an entry naming a later post, or no post of the id, makes the index say
// 0 ("cannot say"), never a wrong answer; threads do not share entries.
func RunFirstPosts(t *testing.T, h FirstPostHarness) {
	tests := []struct {
		name string
		fn   func(*testing.T, FirstPostHarness)
	}{
		{"FirstNamesItself", testFirstNamesItself},
		{"RepostResolvesToFirst", testRepostResolvesToFirst},
		{"ForgedEntries", testForgedEntries},
		{"ThreadsApart", testFirstPostThreadsApart},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

func firstPost(t *testing.T, s events.Store, thread, id string, seq uint64) uint64 {
	t.Helper()
	idx, ok := s.(events.FirstPosts)
	if !ok {
		t.Fatalf("%T has no first-post index", s)
	}
	got, err := idx.FirstPost(ctxT(t), thread, id, seq)
	if err != nil {
		t.Fatalf("FirstPost(%s, %s, %d): %v", thread, id, seq, err)
	}
	return got
}

// rawRepost writes a message_posted with id to thread's posted subject,
// past the post's own check, as a forger or a poster from before the
// message-id bucket would, and returns its sequence.
func rawRepost(t *testing.T, h Harness, s events.Store, thread, id string) uint64 {
	t.Helper()
	data, err := proto.Marshal(&eventspb.Event{
		Thread: thread,
		Body:   &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: id, Author: "forger", Text: "again"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.PublishRaw(t, h.Subjects.Thread(thread, events.KindPosted), events.Header{events.HeaderType: {string(events.TypeMessagePosted)}}, data)
	last, err := s.LastSeq(ctxT(t), thread, events.KindPosted)
	if err != nil {
		t.Fatal(err)
	}
	return last
}

func testFirstNamesItself(t *testing.T, h FirstPostHarness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m1 := post(t, s, th, "m1", "one")
	for i := range 2 {
		if got := firstPost(t, s, th, "m1", m1); got != m1 {
			t.Fatalf("ask %d: the first post of m1 is %d, want %d (itself)", i, got, m1)
		}
	}
	// Another handle, as another runner: the same answer.
	if got := firstPost(t, h.Open(t, time.Now), th, "m1", m1); got != m1 {
		t.Fatalf("from another handle: %d, want %d", got, m1)
	}
}

func testRepostResolvesToFirst(t *testing.T, h FirstPostHarness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m1 := post(t, s, th, "m1", "one")
	post(t, s, th, "m2", "two")
	firstPost(t, s, th, "m1", m1)
	re := rawRepost(t, h.Harness, s, th, "m1")
	if re <= m1 {
		t.Fatalf("repost at %d, not after %d", re, m1)
	}
	if got := firstPost(t, s, th, "m1", re); got != m1 {
		t.Fatalf("the repost at %d resolves to %d, want the first post %d", re, got, m1)
	}
	if got := firstPost(t, s, th, "m1", m1); got != m1 {
		t.Fatalf("the first post asked again: %d, want %d", got, m1)
	}
}

func testForgedEntries(t *testing.T, h FirstPostHarness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	a := post(t, s, th, "a", "one")
	b := post(t, s, th, "b", "two")
	// An entry naming b, which is no post of id x.
	h.Forge(t, th, "x", b)
	x := post(t, s, th, "x", "three")
	if got := firstPost(t, s, th, "x", x); got != 0 {
		t.Fatalf("an entry naming %d, a post of another id: the index says %d, want 0", b, got)
	}
	// An entry naming a later post of the id, written before the earlier
	// post was resolved.
	y1 := post(t, s, th, "y", "four")
	y2 := rawRepost(t, h.Harness, s, th, "y")
	h.Forge(t, th, "y", y2)
	if got := firstPost(t, s, th, "y", y1); got != 0 {
		t.Fatalf("an entry naming the later post %d: the first post %d resolves to %d, want 0", y2, y1, got)
	}
	if got := firstPost(t, s, th, "y", y2); got != y2 {
		t.Fatalf("the entry names %d itself: %d", y2, got) // the caller's memory decides
	}
	// An entry naming a sequence past the log.
	h.Forge(t, th, "z", 1<<40)
	z := post(t, s, th, "z", "five")
	if got := firstPost(t, s, th, "z", z); got != 0 {
		t.Fatalf("an entry past the log: %d, want 0", got)
	}
	// An entry naming an earlier post of the id in another thread.
	other := th + "-o"
	o := post(t, s, other, "w", "six")
	h.Forge(t, th, "w", o)
	w := post(t, s, th, "w", "seven")
	if w > o {
		if got := firstPost(t, s, th, "w", w); got != 0 {
			t.Fatalf("an entry naming %s's post %d: %d, want 0", other, o, got)
		}
	}
	if got := firstPost(t, s, th, "a", a); got != a {
		t.Fatalf("an honest id beside them: %d, want %d", got, a)
	}
}

func testFirstPostThreadsApart(t *testing.T, h FirstPostHarness) {
	s := h.Open(t, time.Now)
	t1, t2 := NewThread(t), NewThread(t)+"-2"
	p1 := post(t, s, t1, "same", "one")
	p2 := post(t, s, t2, "same", "two")
	if got := firstPost(t, s, t1, "same", p1); got != p1 {
		t.Fatalf("%s: %d, want %d", t1, got, p1)
	}
	if got := firstPost(t, s, t2, "same", p2); got != p2 {
		t.Fatalf("%s: %d, want %d: threads share no entry", t2, got, p2)
	}
}
