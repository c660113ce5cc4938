//go:build race

package runner_test

// raceDetector says the race detector is on: the flood past the default
// budget, slow under it, runs only without it.
const raceDetector = true
