// Package bytesconv views bytes as a string without copying, for map
// lookups and comparisons on the hot path.
package bytesconv

import "unsafe"

// B2S views b as a string without copying. The caller guarantees b is not
// modified while the string is in use and that the string is not retained.
func B2S(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// S2B returns the bytes of s without copying; nil for "". They must not
// be modified.
func S2B(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
