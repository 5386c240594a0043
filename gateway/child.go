package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// child is a stdio upstream's process. It runs in a process group of its
// own, so that stopping it stops what it started too (npx starts node,
// which may start more): its stdin is closed, then the group gets
// SIGTERM, then SIGKILL, as the spec's stdio shutdown says.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	exited chan struct{}
	err    error // cmd.Wait's, once exited
	logged chan struct{}
	grace  time.Duration
	once   sync.Once
}

// stopGrace is how long a child is given after its stdin closes, and
// again after SIGTERM.
const stopGrace = 2 * time.Second

// startChild starts u's command. Its stderr is logged under the
// upstream's name, one line per record, rate-limited (stderrBurst lines,
// then stderrRate per second; the next line says how many were
// suppressed).
func startChild(u *Upstream, log *slog.Logger) (*child, error) {
	cmd := exec.Command(u.Command, u.Args...)
	cmd.Dir = u.Dir
	if len(u.Env) > 0 {
		cmd.Env = append(os.Environ(), u.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW, errR, errW} {
			f.Close()
		}
		return nil, fmt.Errorf("start %s: %w", u.Command, err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	c := &child{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{}), logged: make(chan struct{}), grace: stopGrace}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	go c.logStderr(errR, log)
	return c, nil
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// Stderr is logged at most stderrBurst lines at once, then stderrRate
// lines per second.
const (
	stderrBurst = 20
	stderrRate  = 5
)

func (c *child) logStderr(f *os.File, log *slog.Logger) {
	defer close(c.logged)
	defer f.Close()
	r := bufio.NewReaderSize(f, 4096)
	tokens, last, suppressed := float64(stderrBurst), time.Now(), 0
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			now := time.Now()
			tokens = min(stderrBurst, tokens+now.Sub(last).Seconds()*stderrRate)
			last = now
			if tokens >= 1 {
				tokens--
				if n := len(line); line[n-1] == '\n' {
					line = line[:n-1]
				}
				if suppressed > 0 {
					log.Info("upstream stderr", "pid", c.pid(), "line", string(line), "suppressed", suppressed)
					suppressed = 0
				} else {
					log.Info("upstream stderr", "pid", c.pid(), "line", string(line))
				}
			} else if !errors.Is(err, bufio.ErrBufferFull) {
				suppressed++
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// stop stops the child and its process group, and waits for it.
func (c *child) stop() {
	c.once.Do(func() {
		c.stdin.Close()
		if !c.wait(c.grace) {
			_ = syscall.Kill(-c.pid(), syscall.SIGTERM)
			if !c.wait(c.grace) {
				_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
				<-c.exited
			}
		}
		// What the child started may outlive it, holding the group:
		// SIGKILL ends it; then our end of stdout closes.
		_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
		c.stdout.Close()
		select {
		case <-c.logged:
		case <-time.After(c.grace):
		}
	})
}

func (c *child) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}
