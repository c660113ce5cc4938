//go:build race

package chaos

// raceDetector says the race detector is on: the 5,000-thread soak, too
// slow under it on two cores, runs in its own step without it.
const raceDetector = true
