package loadtest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ),
// 100 per second on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// ProcCPU returns the CPU time (user plus system) process pid has used so
// far, from /proc/PID/stat. Its resolution is 10 ms.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("loadtest: cpu of pid %d: %w", pid, err)
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count fields from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("loadtest: cpu of pid %d: malformed stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("loadtest: cpu of pid %d: short stat", pid)
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("loadtest: cpu of pid %d: malformed stat", pid)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// procCPUSum returns the CPU time processes pids have used so far, summed.
func procCPUSum(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		c, err := ProcCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

// procRSSSum returns the resident set sizes of processes pids, summed.
func procRSSSum(pids []int) (int64, error) {
	var sum int64
	for _, pid := range pids {
		n, err := ProcRSS(pid)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// ProcRSS returns the resident set size of process pid in bytes, from the
// VmRSS line of /proc/PID/status.
func ProcRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("loadtest: rss of pid %d: %w", pid, err)
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(v)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("loadtest: rss of pid %d: no VmRSS", pid)
}

// ProcThreads returns the number of threads of process pid, from the
// Threads line of /proc/PID/status.
func ProcThreads(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("loadtest: threads of pid %d: %w", pid, err)
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				break
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("loadtest: threads of pid %d: no Threads line", pid)
}

// ProcFDs returns the number of open file descriptors of process pid, the
// entries of /proc/PID/fd (readable for processes of the same user).
func ProcFDs(pid int) (int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, fmt.Errorf("loadtest: fds of pid %d: %w", pid, err)
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(1024)
		n += len(names)
		if err != nil || len(names) == 0 {
			break
		}
	}
	return n, nil
}

// ProcStats is one reading of a process from /proc.
type ProcStats struct {
	RSSBytes int64   `json:"rss_bytes"`
	Threads  int     `json:"threads"`
	FDs      int     `json:"fds"`
	CPUS     float64 `json:"cpu_s"` // user + system, since the process started
}

// ReadProc reads pid's resident memory, threads, open descriptors and CPU
// time. It returns what it could read and the first error.
func ReadProc(pid int) (ProcStats, error) {
	var st ProcStats
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	var err error
	if st.RSSBytes, err = ProcRSS(pid); err != nil {
		keep(err)
	}
	if st.Threads, err = ProcThreads(pid); err != nil {
		keep(err)
	}
	if st.FDs, err = ProcFDs(pid); err != nil {
		keep(err)
	}
	if c, err := ProcCPU(pid); err != nil {
		keep(err)
	} else {
		st.CPUS = c.Seconds()
	}
	return st, first
}
