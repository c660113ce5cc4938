package client

import (
	"context"
	"fmt"
)

// LastSeq returns the stream's last sequence: the newest event of any
// thread. 0 means the stream is empty.
func (c *Client) LastSeq(ctx context.Context) (uint64, error) {
	seq, err := c.store.LastStreamSeq(ctx)
	if err != nil {
		return 0, fmt.Errorf("client: last sequence: %w", err)
	}
	return seq, nil
}
