package codec

import (
	"bytes"
	"errors"
)

// The scanners below read JSON that is already known to be valid (params
// and results after Decode, documents after a full parse). They never
// allocate and never unescape: a key or string with a backslash escape is
// reported, so the caller can fall back to the full decoder.

// ErrEscaped reports a key or string holding a backslash escape, which the
// scanners do not decode.
var ErrEscaped = errors.New("codec: escaped string")

// SkipWS returns the index of the first non-space byte of b at or after i.
func SkipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipValue returns the index just past the JSON value starting at b[i], or
// -1 if b ends inside it.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		// The closing quote is the first one not escaped: preceded by an
		// even number of backslashes. IndexByte skips the string's bytes
		// many at a time.
		for j := i + 1; ; j++ {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				return -1
			}
			j += k
			n := 0
			for p := j - 1; p > i && b[p] == '\\'; p-- {
				n++
			}
			if n%2 == 0 {
				return j + 1
			}
		}
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				k := SkipValue(b, j)
				if k < 0 {
					return -1
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		for j := i; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
		}
		return len(b)
	}
}

// ObjectField returns the raw value of key in the top-level JSON object
// obj (the last one if the key repeats), aliasing obj. found is false when
// obj holds no such key or is not an object. It returns ErrEscaped when
// any top-level key holds an escape, since such a key might spell key.
func ObjectField(obj []byte, key string) (val []byte, found bool, err error) {
	keys, v := [1]string{key}, [1][]byte{}
	err = ObjectFields(obj, keys[:], v[:])
	return v[0], v[0] != nil, err
}

// ObjectFields finds several top-level keys of obj in one pass: vals[i]
// gets the raw value of keys[i] (the last one if it repeats), aliasing obj,
// or stays nil. vals must be as long as keys. It returns ErrEscaped when a
// top-level key holds an escape, and ErrParse when obj is not an object.
func ObjectFields(obj []byte, keys []string, vals [][]byte) error {
	for i := range vals {
		vals[i] = nil
	}
	i := SkipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrParse
	}
	i++
	for {
		i = SkipWS(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return nil
		}
		if obj[i] == ',' {
			i++
			continue
		}
		if obj[i] != '"' {
			return ErrParse
		}
		end := bytes.IndexByte(obj[i+1:], '"')
		if end < 0 {
			return ErrParse
		}
		k := obj[i+1 : i+1+end]
		if bytes.IndexByte(k, '\\') >= 0 {
			return ErrEscaped
		}
		i = SkipWS(obj, i+2+end)
		if i >= len(obj) || obj[i] != ':' {
			return ErrParse
		}
		i = SkipWS(obj, i+1)
		start := i
		if i = SkipValue(obj, i); i < 0 {
			return ErrParse
		}
		for j, key := range keys {
			if string(k) == key {
				vals[j] = obj[start:i]
			}
		}
	}
}

// StringValue returns the content of the raw JSON string s without its
// quotes, aliasing s. It returns ErrEscaped if s holds an escape, and
// ErrParse if s is not a string.
func StringValue(s []byte) ([]byte, error) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return nil, ErrParse
	}
	in := s[1 : len(s)-1]
	if bytes.IndexByte(in, '\\') >= 0 {
		return nil, ErrEscaped
	}
	return in, nil
}
