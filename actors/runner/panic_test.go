package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/testkit"
)

// A thread actor that panics is stopped, not restarted on its stale state,
// and its thread is handed over: claimed again with a fresh core, and its
// message still gets its run.
func TestRunner_panicHandsOver(t *testing.T) {
	s := memstore.New(memstore.Config{})
	var panicked atomic.Int32
	restore := runner.SetReceiveHook(func(th string, msg any) {
		if _, ok := msg.(thread.Observed); ok && th == "boom" && panicked.CompareAndSwap(0, 1) {
			panic("injected panic in a thread actor")
		}
	})
	defer restore()
	r := startRunner(t, runner.Config{Store: s})
	defer r.Stop(context.Background())
	post(t, s, "boom", "first")
	testkit.WaitFor(t, 10*time.Second, "the panic", func() (bool, string) { return panicked.Load() == 1, "" })
	post(t, s, "boom", "second")
	testkit.WaitFor(t, 15*time.Second, "both messages run after the handover", settled(t, s, "boom"))
	v := fold(t, s, "boom")
	if len(v.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(v.Runs))
	}
	claims := 0
	envs, _ := s.Load(context.Background(), "boom", 1)
	for _, e := range envs {
		if e.Event.GetThreadClaimed() != nil {
			claims++
		}
	}
	if claims < 2 {
		t.Fatalf("%d claims: want the thread claimed again after the panic", claims)
	}
	if st := r.Stats(); st.Panics != 1 {
		t.Fatalf("stats %+v: want 1 panic", st)
	}
	auditClean(t, s, "boom")
}
