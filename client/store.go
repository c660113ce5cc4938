package client

import (
	"github.com/artifactr/artifactr/events"
)

// Store is what a [Client] needs of a store: posts and the client-written
// appends, reads of the log and of snapshots, and the read models' buckets
// (summaries, delayed posts). natsstore's Store and memstore's implement
// it. It holds no lease roles: a client has the client's permissions
// (DESIGN §9) and never holds a thread.
//
// A store that also implements [events.HeadReader] gets reject posts in a
// few reads; without it a reject post folds the thread (see
// internal/doubletext).
type Store interface {
	events.Poster
	events.Appender
	events.Reader
	events.SnapshotStore
	events.ReadModelStore
	// Close releases the store's resources.
	Close() error
}

// New returns a client of s, which it closes on [Client.Close]. [Dial]
// builds one over NATS; tests and embedders pass their own, such as a
// memstore.
func New(s Store) *Client { return &Client{store: s} }
