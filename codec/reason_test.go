package codec

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseReasonLabels: every reason has a label of its own, fit for a
// metrics label value; a reason added without one fails here.
func TestCloseReasonLabels(t *testing.T) {
	label := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	seen := map[string]CloseReason{}
	for r := range CloseReason(NumCloseReasons) {
		t.Run(fmt.Sprint(int(r)), func(t *testing.T) {
			l := r.String()
			require.Regexp(t, label, l, "reason %d has no label", r)
			if prev, dup := seen[l]; dup {
				t.Fatalf("reasons %d and %d share the label %q", prev, r, l)
			}
			seen[l] = r
			assert.Equal(t, l, r.Error())
			assert.Equal(t, r, ReasonOf(r), "a reason is its own cause")
			assert.Equal(t, r, ReasonOf(r.Err("pkg: something")))
		})
	}
	assert.Equal(t, "other", CloseReason(NumCloseReasons).String(), "out of range")
	assert.Equal(t, "other", ReasonOther.String())
}

// TestReasonOf: a cause's reason is read through any wrapping, the first
// by precedence when it carries several; the standard library's errors
// of a connection's end have theirs; nil is a close without a reason.
func TestReasonOf(t *testing.T) {
	idle := ReasonIdleTimeout.Err("tcp: idle timeout")
	ended := ReasonStreamEnded.Err("mcphttp: legacy SSE stream ended")
	slow := ReasonSlowConsumer.Err("mcphttp: slow consumer")
	tests := []struct {
		name string
		err  error
		want CloseReason
	}{
		{"nil", nil, ReasonClosed},
		{"sentinel", idle, ReasonIdleTimeout},
		{"wrapped", fmt.Errorf("tcp: connection closed: %w", idle), ReasonIdleTimeout},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", idle)), ReasonIdleTimeout},
		{"two reasons: the first by precedence", fmt.Errorf("%w: %w", ended, slow), ReasonSlowConsumer},
		{"two reasons, other order", fmt.Errorf("%w: %w", slow, ended), ReasonSlowConsumer},
		{"joined", errors.Join(io.EOF, ended), ReasonStreamEnded},
		{"reason before the standard library's", fmt.Errorf("%w: %w", ended, io.EOF), ReasonStreamEnded},
		{"too large", ErrTooLarge, ReasonTooLarge},
		{"EOF", io.EOF, ReasonClosed},
		{"closed socket", &net.OpError{Op: "read", Err: net.ErrClosed}, ReasonClosed},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ReasonReset},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), ReasonReset},
		{"deadline", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, ReasonTimeout},
		{"anything else", io.ErrUnexpectedEOF, ReasonOther},
		{"an explicit other", ReasonOther.Err("x"), ReasonOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want.String(), ReasonOf(tt.err).String())
		})
	}
}

// TestCloseErrorIs: a close error is its sentinel and its reason, and
// keeps its text.
func TestCloseErrorIs(t *testing.T) {
	idle := ReasonIdleTimeout.Err("tcp: idle timeout")
	wrapped := fmt.Errorf("tcp: connection closed: %w", idle)
	assert.ErrorIs(t, wrapped, idle)
	assert.ErrorIs(t, wrapped, ReasonIdleTimeout)
	assert.NotErrorIs(t, wrapped, ReasonReadTimeout)
	assert.Equal(t, "tcp: idle timeout", idle.Error())
	assert.NotErrorIs(t, idle, ReasonIdleTimeout.Err("tcp: idle timeout"), "each sentinel is its own")
	var r CloseReason
	require.ErrorAs(t, wrapped, &r)
	assert.Equal(t, ReasonIdleTimeout, r)
}

// TestReasonOfAllocs: reading a cause's label costs no allocation (a
// connection's close counts it).
func TestReasonOfAllocs(t *testing.T) {
	causes := []error{
		fmt.Errorf("tcp: connection closed: %w", ReasonIdleTimeout.Err("tcp: idle timeout")),
		fmt.Errorf("%w: %w", ReasonStreamEnded.Err("a"), ReasonSlowConsumer.Err("b")),
		&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		nil,
	}
	var sink CloseReason
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		for _, c := range causes {
			sink += ReasonOf(c)
		}
	}))
	_ = sink
}
