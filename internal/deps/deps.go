// Package deps pins the project's dependencies in go.mod while the packages
// that use them are written. It is removed once they are.
package deps

import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/spf13/cobra"
	_ "go.uber.org/goleak"
	_ "pgregory.net/rapid"
)
