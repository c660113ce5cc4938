//go:build race

package sim_test

// raceOn is set in -race builds, which run the simulation about ten times
// slower; the default number of seeds is scaled down to match.
const raceOn = true
