//go:build race

package runners_test

// raceOn is set in -race builds, which run about ten times slower; the
// default number of seeds is scaled down to match.
const raceOn = true
