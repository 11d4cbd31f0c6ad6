package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one component process. cmd is nil when the process was found
// through the pid file (Attach) rather than started here.
type proc struct {
	name string
	pid  int
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait returns; nil when cmd is nil
}

// spawn starts BinDir/name with args, stdout and stderr appended to
// Dir/logs/<name>.log.
func (c *Cluster) spawn(name string, args ...string) (*proc, error) {
	f, err := os.OpenFile(c.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own copy
	fmt.Fprintf(f, "\n=== testcluster: %s starting %s %s\n", time.Now().Format(time.RFC3339), name, strings.Join(args, " "))

	cmd := exec.Command(filepath.Join(c.BinDir, name), args...)
	cmd.Dir = c.Dir
	cmd.Stdin = nil
	cmd.Stdout = f
	cmd.Stderr = f
	if c.detach {
		// Own session: survives this process and its terminal.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Die with the test binary even if it crashes before Stop.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// running reports whether the process is still alive (and, for an attached
// pid, still the same program: the pid may have been reused).
func (p *proc) running() bool {
	if p.cmd != nil {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	return pidIs(p.pid, p.name)
}

// exitStatus describes how a started process ended, for error messages.
func (p *proc) exitStatus() string {
	if p.cmd != nil && p.cmd.ProcessState != nil {
		return p.cmd.ProcessState.String()
	}
	return "exited"
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *proc) stop(grace time.Duration) error {
	if !p.running() {
		return nil
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	if p.waitExit(grace) {
		return nil
	}
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	if p.waitExit(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pid)
}

func (p *proc) waitExit(d time.Duration) bool {
	if p.cmd != nil {
		select {
		case <-p.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.running() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !p.running()
}

// pidIs reports whether pid is a live (non-zombie) process whose argv[0]
// names the component.
func pidIs(pid int, name string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may contain spaces and parens.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return filepath.Base(string(argv0)) == name
}

// writePids writes Dir/pids as name=pid lines, in start order.
func (c *Cluster) writePids() error {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "%s=%d\n", p.name, p.pid)
	}
	tmp := c.pidsPath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.pidsPath())
}

func readPids(path string) ([]*proc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var procs []*proc
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, v, ok := strings.Cut(line, "=")
		pid, err := strconv.Atoi(v)
		if !ok || err != nil || pid <= 0 {
			return nil, fmt.Errorf("%s:%d: want name=pid, got %q", path, i+1, line)
		}
		procs = append(procs, &proc{name: name, pid: pid})
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("%s: no processes listed", path)
	}
	return procs, nil
}

// TailFile returns the last n lines of a file, reading at most 1 MiB from its end.
func TailFile(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := st.Size()
	chunk := int64(64 << 10)
	for {
		off := max(size-chunk, 0)
		buf := make([]byte, size-off)
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		s := strings.TrimRight(string(buf), "\n")
		if strings.Count(s, "\n") >= n || off == 0 || chunk >= 1<<20 {
			if off > 0 {
				_, s, _ = strings.Cut(s, "\n") // first line is probably cut
			}
			return lastLines(s, n), nil
		}
		chunk *= 4
	}
}
