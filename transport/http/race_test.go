//go:build race

package http

// raceEnabled: the race detector changes allocation (sync.Pool drops
// items at random), so heap measurements do not hold under it.
const raceEnabled = true
