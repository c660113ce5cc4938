package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/server"
)

// TestMain fails the package if a server leaves a goroutine behind: Stop
// and Kill end everything Start started (DESIGN.md §4).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStart_noStore(t *testing.T) {
	_, err := server.Start(t.Context(), server.Config{})
	var se *server.StartError
	if !errors.As(err, &se) || se.Step != server.StepConfig {
		t.Fatalf("Start without a store: %v, want a StartError at %q", err, server.StepConfig)
	}
}

// TestServer_Stop_answers: a server with every part on answers a post,
// serves /readyz and the HTTP API, and Stop drains it, releasing the claim.
func TestServer_Stop_answers(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	quiet := slog.New(slog.DiscardHandler)
	ctx := t.Context()
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := server.Start(ctx, server.Config{
		Store:       store,
		Runner:      runner.Config{Agent: agent.Echo{}, ID: "srv-test", ClaimTTL: 2 * time.Second, IdleTimeout: time.Hour},
		Projector:   true,
		MetricsAddr: "127.0.0.1:0",
		HTTP:        server.HTTPConfig{Addr: "127.0.0.1:0", Client: client.Config{URL: srv.ClientURL()}},
		Logger:      quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			s.Kill()
		}
	}()
	if s.ID() != "srv-test" || s.ProjectorOwner() != "srv-test/summaries" || s.MetricsAddr() == "" || s.HTTPURL() == "" {
		t.Fatalf("accessors: id %q owner %q metrics %q http %q", s.ID(), s.ProjectorOwner(), s.MetricsAddr(), s.HTTPURL())
	}
	c, err := client.Dial(ctx, client.Config{URL: srv.ClientURL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Post(ctx, "t1", "hello")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := c.Wait(wctx, "t1", p.Seq)
	if err != nil || res.Status != projections.RunCompleted {
		t.Fatalf("wait: %+v %v", res, err)
	}
	for _, u := range []string{"http://" + s.MetricsAddr() + "/readyz", s.HTTPURL() + "/info"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", u, resp.Status)
		}
	}
	sctx, scancel := context.WithTimeout(ctx, s.StopTimeout())
	defer scancel()
	stopped = true
	if err := s.Stop(sctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if st := s.Stats(); st.Claims != 1 || st.Completed != 1 {
		t.Errorf("stats: %+v, want 1 claim and 1 run completed", st)
	}
	if _, live, err := store.GetLease(ctx, "t1"); err != nil || live {
		t.Errorf("after Stop the lease is live (%v, %v): the claim was not released", live, err)
	}
}
