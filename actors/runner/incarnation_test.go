package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/testkit"
)

// probe is a message no thread actor acts on: the test sends it to a PID to
// see which actor it reaches.
type probe struct{ n int }

// A thread actor's goroutines (appends, syncs, runs) report to the PID it
// had, and may do so after it stopped. A later claim of the same thread in
// the same runner is a new actor, which must never get those reports: an
// append result it takes for its own lets it plan a second write while the
// first is in flight, and a stale refusal stops it. protoactor resolves a
// dead actor's PID by name, so each claim's actor needs a name of its own.
func TestThreadActor_staleMessagesDoNotReachTheNextClaim(t *testing.T) {
	const th = "reborn"
	var mu sync.Mutex
	var pids []*actor.PID       // each actor of th, in the order they started
	got := map[int]*actor.PID{} // which actor each probe reached
	testHookReceive = func(thread string, self *actor.PID, msg any) {
		if thread != th {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch m := msg.(type) {
		case *actor.Started:
			pids = append(pids, self)
		case probe:
			got[m.n] = self
		}
	}
	defer func() { testHookReceive = nil }()
	s := memstore.New(memstore.Config{})
	r, err := New(Config{Store: s, Agent: agent.Echo{}, IdleTimeout: 20 * time.Millisecond, ClaimTTL: time.Second, ShutdownGrace: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	started := func(n int) func() (bool, string) {
		return func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(pids) >= n, fmt.Sprintf("%d actors started", len(pids))
		}
	}
	released := func() (bool, string) {
		envs, err := s.Load(context.Background(), th, 1)
		if err != nil || len(envs) == 0 {
			return false, fmt.Sprint(err)
		}
		last := envs[len(envs)-1]
		return last.Event.GetThreadReleased() != nil, "last event " + string(last.Type)
	}
	for i, text := range []string{"one", "two"} {
		if _, err := s.Post(context.Background(), th, &eventspb.MessagePosted{Text: text}); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 10*time.Second, "claim "+text, started(i+1))
		testkit.WaitFor(t, 10*time.Second, "release after "+text, released)
	}
	// Both claims ended. Claim a third time, with a run that waits for an
	// answer so that the actor stays, then send a probe to each earlier
	// actor and one to the live one. Root's sends reach one mailbox in
	// order, so once the last probe arrived, any probe the live actor was
	// to get has arrived too.
	if _, err := s.Post(context.Background(), th, &eventspb.MessagePosted{Text: "ask: are you there?"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "claim three", started(3))
	mu.Lock()
	live := pids[2]
	old := pids[:2]
	mu.Unlock()
	for i, pid := range old {
		r.sys.Root.Send(pid, probe{n: i})
	}
	r.sys.Root.Send(live, probe{n: 2})
	testkit.WaitFor(t, 10*time.Second, "the live actor's probe", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return got[2] != nil, ""
	})
	mu.Lock()
	defer mu.Unlock()
	for i := range old {
		if p := got[i]; p != nil {
			t.Errorf("a message sent to the actor of claim %d (%s) reached actor %s", i+1, old[i].Id, p.Id)
		}
	}
}
