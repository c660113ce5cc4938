package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
)

// serve starts what `artifactr serve` runs, in-process: an embedded NATS
// server with JetStream in a temporary directory, and a runner with agent
// on it. stop shuts both down and removes the directory.
func serve(a agent.Agent) (url string, stop func()) {
	dir, err := os.MkdirTemp("", "artifactr-client-")
	if err != nil {
		panic(err)
	}
	srv, err := natsembed.Start(natsembed.Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		panic(err)
	}
	r, err := runner.New(runner.Config{Store: store, Agent: a, ID: "example", IdleTimeout: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := r.Start(ctx); err != nil {
		panic(err)
	}
	return srv.ClientURL(), func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_ = r.Stop(sctx)
		store.Close()
		srv.Shutdown()
		os.RemoveAll(dir)
	}
}

// Post a message, and wait for the run that takes it.
func Example() {
	url, stop := serve(agent.Echo{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, client.Config{URL: url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	p, err := c.Post(ctx, "t1", "hello", client.WithMessageID("hello-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := c.Wait(ctx, "t1", p.Seq)
	switch {
	case errors.Is(err, client.ErrThreadBusy):
		fmt.Println("its claim lost the thread:", err)
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Println(p.Seq, r.Status, r.Output)
	}
	// Output: 1 completed echo: hello
}

// Posting is idempotent by message id.
func ExampleClient_Post() {
	url, stop := serve(agent.Echo{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{URL: url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	for range 2 {
		p, err := c.Post(ctx, "t1", "hello", client.WithMessageID("m1"), client.WithAuthor("ada"))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(p.Seq, p.Duplicate)
	}
	// Output:
	// 1 false
	// 1 true
}

// Wait returns when the run asks a question; the next message answers it.
func ExampleClient_Wait() {
	url, stop := serve(agent.Echo{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{URL: url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	for _, text := range []string{"ask: your name?", "Ada"} {
		p, err := c.Post(ctx, "t1", text)
		if err != nil {
			fmt.Println(err)
			return
		}
		r, err := c.Wait(ctx, "t1", p.Seq)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s as %s: status %s, question %q, output %q\n", r.RunID, r.TakenAs, r.Status, r.Question, r.Output)
	}
	// Output:
	// run-1-2 as prompt: status active, question "your name?", output ""
	// run-1-2 as answer: status completed, question "", output "echo: your name? -> Ada"
}

// Watch yields a thread's events, decoded, from a sequence on; breaking
// out of the loop stops it.
func ExampleClient_Watch() {
	url, stop := serve(agent.Echo{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{URL: url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.Post(ctx, "t1", "hello"); err != nil {
		fmt.Println(err)
		return
	}
	for env, err := range c.Watch(ctx, "t1", 1) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(env.Seq, env.Type)
		if env.Event.GetRunCompleted() != nil {
			break
		}
	}
	// Output:
	// 1 message_posted
	// 2 thread_claimed
	// 3 run_started
	// 4 run_output
	// 5 run_completed
}

// Thread folds a thread's events, now or as it was at a sequence.
func ExampleClient_Thread() {
	url, stop := serve(agent.Echo{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{URL: url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	p, err := c.Post(ctx, "t1", "hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.Wait(ctx, "t1", p.Seq); err != nil {
		fmt.Println(err)
		return
	}
	for _, opt := range []client.ThreadOption{client.AtSeq(p.Seq), client.AtSeq(3), client.AtTime(time.Now())} {
		t, err := c.Thread(ctx, "t1", opt)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("at %d: %d pending, %d runs\n", t.LastSeq, len(t.Pending()), len(t.Runs))
	}
	// Output:
	// at 1: 1 pending, 0 runs
	// at 3: 0 pending, 1 runs
	// at 5: 0 pending, 1 runs
}

// Fork starts a thread with another's history up to one of its events.
// The copied messages are history, never prompts; the new thread's runs
// see them.
func ExampleClient_Fork() {
	url, stop := serve(agent.Echo{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{URL: url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	var last client.Result
	for _, text := range []string{"hello", "how are you?"} {
		p, err := c.Post(ctx, "t1", text)
		if err != nil {
			fmt.Println(err)
			return
		}
		if last, err = c.Wait(ctx, "t1", p.Seq); err != nil {
			fmt.Println(err)
			return
		}
	}
	t1, err := c.Thread(ctx, "t1")
	if err != nil {
		fmt.Println(err)
		return
	}
	at := t1.Runs[0].EndSeq // after the first run, before the second message
	f, err := c.Fork(ctx, "t1", at, "t2")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("t2 forked from t1 at %d: %d message, %d run\n", f.SourceSeq, f.Messages, f.Runs)
	if again, err := c.Fork(ctx, "t1", at, "t2"); err != nil || !again.Duplicate || again.Seq != f.Seq {
		fmt.Println("a retried fork is not a duplicate:", again, err)
	}
	if _, err := c.Fork(ctx, "t1", last.MessageSeq, "t2"); errors.Is(err, client.ErrThreadExists) {
		fmt.Println("t2 exists")
	}

	p, err := c.Post(ctx, "t2", "bonjour")
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.Wait(ctx, "t2", p.Seq); err != nil {
		fmt.Println(err)
		return
	}
	t2, err := c.Thread(ctx, "t2")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range t2.Messages {
		fmt.Printf("%q %s\n", m.Text, m.Consumed.Kind)
	}
	for _, r := range t2.Runs {
		fmt.Printf("%s %q\n", r.Status, r.Output)
	}
	// Output:
	// t2 forked from t1 at 5: 1 message, 1 run
	// t2 exists
	// "hello" forked
	// "bonjour" prompt
	// completed "echo: hello"
	// completed "echo: bonjour"
}
