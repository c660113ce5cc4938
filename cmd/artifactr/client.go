package main

import (
	"context"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events/natsstore"
)

// dial connects a client (package client) for the commands that use it.
// readOnly creates nothing: a server without the stream fails with exit 1.
// Connection errors are explained as open's are.
func (a *app) dial(ctx context.Context, c *connFlags, readOnly bool) (*client.Client, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	opts, err := c.natsOptions()
	if err != nil {
		return nil, err
	}
	cl, err := client.Dial(ctx, client.Config{
		URL:         c.url,
		Stream:      c.stream,
		Partitions:  c.partitions,
		Timeout:     c.timeout,
		NATSOptions: opts, // the flags' credentials and TLS, checked as usage errors
		ReadOnly:    readOnly,
		NewFence:    natsstore.FenceLayout(c.fence),
		Logger:      a.log,
	})
	if err != nil {
		return nil, openError(c.url, c.stream, err)
	}
	return cl, nil
}
