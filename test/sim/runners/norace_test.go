//go:build !race

package runners_test

const raceOn = false
