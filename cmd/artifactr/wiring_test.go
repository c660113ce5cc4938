package main

import (
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/natsstore"
)

// serve hands its runner the work queue as it is: a graceful stop gives the
// queue's unacknowledged wake-ups back through it.
var _ runner.WorkReleaser = (*natsstore.WorkQueue)(nil)
