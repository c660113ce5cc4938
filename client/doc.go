// Package client is a Go client of artifactr: it posts messages to threads,
// waits for the runs that take them, follows and reads threads, and forks
// them. The artifactr CLI's post, show, watch and fork commands use it.
//
// A client needs the NATS permissions of artifactr's client role (DESIGN
// §9): it writes only threads' posted subjects, where posts and forks go,
// and reads the stream.
//
// # Usage
//
//	c, err := client.Dial(ctx, client.Config{URL: "nats://127.0.0.1:4222"})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	p, err := c.Post(ctx, "t1", "hello", client.WithMessageID("hello-1"))
//	if err != nil {
//		return err
//	}
//	r, err := c.Wait(ctx, "t1", p.Seq) // the run that took the message
//	switch {
//	case errors.Is(err, client.ErrThreadBusy):
//		// its claim lost the thread before it ran; err names the run that took it
//	case err != nil:
//		return err
//	}
//	fmt.Println(r.Status, r.Output) // completed echo: hello
//
//	f, err := c.Fork(ctx, "t1", p.Seq, "t1-b") // t1-b starts with t1's history up to p.Seq
//	for env, err := range c.Watch(ctx, "t1-b", f.Seq) { ... } // its events, live
//	t, err := c.Thread(ctx, "t1", client.AtSeq(p.Seq))       // t1 as it was
//
// [Dial] connects over NATS; [New] takes any [Store], such as a memstore in
// a test or an embedder's own.
//
// # Errors
//
// Errors are prefixed "client: " and wrap the store's sentinels
// (events.ErrInvalidThreadID, events.ErrConflict, events.ErrUnavailable,
// ...) and this package's: [ErrThreadBusy] (a [*BusyError]),
// [ErrThreadExists], [ErrNoSuchEvent] and [ErrNoEvents].
package client
