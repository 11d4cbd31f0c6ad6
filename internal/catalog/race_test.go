//go:build race

package catalog

// raceEnabled: the race detector slows allocation-heavy tests tenfold, so
// they measure fewer objects under it. It does not change what they
// measure: the heap statistics count no shadow memory.
const raceEnabled = true
