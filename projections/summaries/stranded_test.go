package summaries

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// strandedLog is issue 21's trail on T (a post lands while A holds it, A
// releases it without taking the post), beside a thread held with a post
// pending (U) and one whose post was answered (W).
func strandedLog() *eventgen.Log {
	l := eventgen.NewLog()
	claim := func(th, holder string) eventgen.Writer {
		w := eventgen.Writer{Thread: th, Holder: holder}
		w.ClaimSeq = l.CAS(w.Claimed(1)).Seq
		return w
	}
	a := claim("T", "A")
	l.Post(eventgen.Writer{Thread: "T"}.Post("t1", "hello"))
	l.CAS(a.Released())
	claim("U", "B")
	l.Post(eventgen.Writer{Thread: "U"}.Post("u1", "held"))
	m := l.Post(eventgen.Writer{Thread: "W"}.Post("w1", "answered")).Seq
	c := claim("W", "C")
	l.Fenced(c.Started("r1", m))
	l.CAS(c.Completed("r1"))
	l.CAS(c.Released())
	return l
}

// reports records the stranded threads a projector reports.
type reports struct {
	mu  sync.Mutex // protects got
	got []string
}

func (r *reports) add(th string, _ time.Time) {
	r.mu.Lock()
	r.got = append(r.got, th)
	r.mu.Unlock()
}

func (r *reports) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// A thread with a message pending, no run and no claim for longer than
// StrandedAfter is reported, once the projector's clock says so, and no
// other: not one held with a post pending, not one answered. A new session
// (a restart) finds it again from the stored summaries, with no new event;
// once it is claimed it is reported no more.
func TestProjector_reportsStranded(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	l := strandedLog()
	pub := newPublisher(t, srv, l)
	pub.publish(t, -1)

	var offset atomic.Int64 // the projector's clock, ahead of the server's
	const after = time.Hour
	rep := &reports{}
	start := func() (*Projector, func()) {
		p := newTestProjector(t, s, "stranded", func(c *Config) {
			c.StrandedAfter, c.Stranded = after, rep.add
			c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		})
		return p, runInBackground(t, p)
	}
	p, stop := start()
	waitCaughtUp(t, p)
	offset.Store(int64(2 * after))
	testkit.WaitFor(t, 30*time.Second, "T reported stranded", func() (bool, string) {
		got := rep.list()
		return len(got) > 0, ""
	})
	stop()
	if got := rep.list(); !slices.Equal(got, []string{"T"}) || p.Stats().Stranded != 1 {
		t.Fatalf("reported %v (stats %+v), want T once", got, p.Stats())
	}

	// A restart: the new session has seen no event of T, and finds it in
	// the bucket.
	p, stop = start()
	testkit.WaitFor(t, 30*time.Second, "T reported again after the restart", func() (bool, string) {
		return len(rep.list()) == 2, ""
	})

	// T is claimed; X is stranded next. Once X is reported, T must not
	// have been again.
	w := eventgen.Writer{Thread: "T", Holder: "D"}
	w.ClaimSeq = l.CAS(w.Claimed(1)).Seq
	l.Post(eventgen.Writer{Thread: "X"}.Post("x1", "nobody"))
	pub.msgs = l.Msgs
	pub.publish(t, -1)
	waitCaughtUp(t, p)
	offset.Store(int64(4 * after))
	testkit.WaitFor(t, 30*time.Second, "X reported stranded", func() (bool, string) {
		return slices.Contains(rep.list(), "X"), ""
	})
	stop()
	if got := rep.list(); !slices.Equal(got, []string{"T", "T", "X"}) {
		t.Fatalf("reported %v, want T, T (after the restart), X", got)
	}
}
