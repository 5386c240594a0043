//go:build !linux

package netlimit

// totalMemory returns the machine's memory in bytes, or 0 if unknown.
func totalMemory() int64 { return 0 }
