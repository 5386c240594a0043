//go:build !race

package mcphttp

const raceEnabled = false
