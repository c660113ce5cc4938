// Command go-client posts a message with package client and waits for the
// run that takes it, as `artifactr post THREAD TEXT --wait` does:
//
//	go run ./examples/go-client -nats nats://127.0.0.1:4222 t1 "hello"
//
// In a module of your own, require github.com/artifactr/artifactr and copy
// this file; test/e2e builds it that way, through a replace directive.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/artifactr/artifactr/client"
)

func main() {
	url := flag.String("nats", client.DefaultURL, "NATS server URL")
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for the run")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: go-client [-nats URL] THREAD TEXT")
		os.Exit(2)
	}
	if err := run(*url, flag.Arg(0), flag.Arg(1), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "go-client:", err)
		os.Exit(1)
	}
}

func run(url, thread, text string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{URL: url})
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := c.Post(ctx, thread, text)
	if err != nil {
		return err
	}
	r, err := c.Wait(ctx, thread, p.Seq, client.FollowTakeover())
	switch {
	case errors.Is(err, client.ErrThreadBusy):
		return fmt.Errorf("the thread was taken over before the run started: %w", err)
	case err != nil:
		return err
	case r.Question != "":
		fmt.Printf("%s asks: %s\n", r.RunID, r.Question)
		return nil
	}
	fmt.Println(r.Output)
	return nil
}
