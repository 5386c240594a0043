package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// sizeValue is a flag of a byte count: plain bytes ("1048576") or a
// number with a unit, binary (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB,
// TB), case and a space between ignored: "4MiB", "64 KiB", "1GB".
// Negative sizes are refused.
type sizeValue[T int | int64] struct{ p *T }

func newSize[T int | int64](p *T, def T) *sizeValue[T] {
	*p = def
	return &sizeValue[T]{p}
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest first, so that "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// The errors of a size; the caller names the flag and the value.
var (
	errNotSize      = errors.New("not a size: bytes, or a number and a unit (64KiB, 4MiB, 1GiB, 1GB)")
	errNegativeSize = errors.New("must not be negative")
	errSizeRange    = errors.New("too large")
)

// parseSize parses a size as sizeValue describes.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	if t == "" {
		return 0, errNotSize
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 {
			return 0, errNegativeSize
		}
		if n > math.MaxInt64/mult {
			return 0, errSizeRange
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errNotSize
	}
	if f < 0 {
		return 0, errNegativeSize
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, errSizeRange
	}
	return int64(v), nil
}

func (v *sizeValue[T]) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if int64(T(n)) != n {
		return errSizeRange
	}
	*v.p = T(n)
	return nil
}

// String prints the size in bytes, or in the largest binary unit that
// divides it exactly.
func (v *sizeValue[T]) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return formatSize(int64(*v.p))
}

func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
