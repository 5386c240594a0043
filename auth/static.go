package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"os"
	"strconv"
	"strings"
)

// staticToken is one static token, kept as its SHA-256 only.
type staticToken struct {
	sum  [sha256.Size]byte
	info *Info
}

// matchStatic returns the caller of the static token whose digest is sum,
// or nil. It compares sum with every token's digest in constant time,
// whatever matches, so timing tells nothing of the tokens.
func (st *state) matchStatic(sum *[sha256.Size]byte) *Info {
	var found *Info
	for i := range st.static {
		if subtle.ConstantTimeCompare(st.static[i].sum[:], sum[:]) == 1 {
			found = st.static[i].info
		}
	}
	return found
}

// parseTokens parses static-token lines: a token, then the scopes it
// grants (none: any). file names the source in errors.
func parseTokens(lines []string, file string) ([]staticToken, error) {
	var out []staticToken
	for n, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		where := "line " + strconv.Itoa(n+1)
		if file != "" {
			where = file + ":" + strconv.Itoa(n+1)
		}
		if len(f[0]) > MaxTokenLen {
			return nil, errors.New("auth: static token too long at " + where)
		}
		info := &Info{Subject: "static:" + strconv.Itoa(n+1), Scopes: f[1:], anyScope: len(f) == 1}
		out = append(out, staticToken{sha256.Sum256([]byte(f[0])), info})
	}
	return out, nil
}

// readLines reads a token file. Its contents never appear in errors.
func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.New("auth: token file: " + err.Error())
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), MaxTokenLen+4096)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, errors.New("auth: token file " + path + ": " + err.Error())
	}
	return lines, nil
}
