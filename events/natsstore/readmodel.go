package natsstore

import "github.com/artifactr/artifactr/events"

// Store implements the read models' port directly, with no vocabulary of
// its own: OpenDurable, DurableState and DeleteDurable are in durable.go,
// OpenBucket in bucket.go.
var _ events.ReadModelStore = (*Store)(nil)
