//go:build race

package catalog

// raceEnabled: the race detector slows allocation-heavy tests tenfold and
// changes what they measure.
const raceEnabled = true
