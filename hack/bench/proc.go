package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// controllerProc is a measured program running as a process: the
// controller, the floor or the zero-logic patcher.
type controllerProc struct {
	cmd     *exec.Cmd
	pid     int
	addr    string // metrics host:port
	logPath string
	started time.Time
	done    chan struct{}

	mu         sync.Mutex
	maxRSSKB   int64 // largest VmRSS sampled
	stopSample chan struct{}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// startController starts the controller binary with the benchmark's flags,
// then extra, then --controller-args.
func startController(o options, kubeconfig, logPath string, grace time.Duration, extra ...string) (*controllerProc, error) {
	ports, err := testcluster.FreePorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := append([]string{
		"--kubeconfig", kubeconfig,
		"--config", o.configFile,
		"--restart-grace-period", grace.String(),
		"--metrics-address", addr,
		"--enable-profiling",
	}, append(extra, o.controllerArgs...)...)
	cmd := exec.Command(o.controller, args...)
	cmd.Env = append(os.Environ(), o.controllerEnv...)
	return startProc(cmd, logPath, addr)
}

// startProc starts any program the benchmark measures (the controller, or
// this binary in a helper role), its output (stderr, and stdout unless the
// caller reads it) appended to logPath, and samples its RSS every 200 ms
// until it exits. addr is its metrics address, "" for a helper.
func startProc(cmd *exec.Cmd, logPath, addr string) (*controllerProc, error) {
	p := &controllerProc{cmd: cmd, addr: addr, logPath: logPath, done: make(chan struct{}), stopSample: make(chan struct{})}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "=== bench: %s\n", strings.Join(cmd.Args, " "))
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	go p.sample()
	return p, nil
}

func (p *controllerProc) sample() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if _, rss, err := p.memory(); err == nil {
			p.mu.Lock()
			p.maxRSSKB = max(p.maxRSSKB, rss)
			p.mu.Unlock()
		}
		select {
		case <-p.done:
			return
		case <-p.stopSample:
			return
		case <-t.C:
		}
	}
}

func (p *controllerProc) sampledMaxRSSKB() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxRSSKB
}

// waitReady returns the time from process start until the controller is
// ready: /readyz answers 200 and the gauge restart_controller_ready is 1 (set
// once every cache has synced). Both are polled every 20 ms. readyz is when
// /readyz first answered 200, which may be earlier (see BENCHMARKS.md).
func (p *controllerProc) waitReady(ctx context.Context, timeout time.Duration) (ready, readyz time.Duration, err error) {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second} // a poll must not outlast its 20 ms by much
	for {
		if _, err := p.fetch(client, "/readyz"); err == nil {
			at := time.Since(p.started)
			if readyz == 0 {
				readyz = at
			}
			if text, err := p.fetch(client, "/metrics"); err == nil {
				if v, ok := metricSum(string(text), "restart_controller_ready"); ok && v == 1 {
					return at, readyz, nil
				}
			}
		}
		select {
		case <-p.done:
			return 0, 0, fmt.Errorf("controller exited during start-up:\n%s", p.logTail(30))
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("controller not ready within %s:\n%s", timeout, p.logTail(30))
		}
	}
}

// rssParts returns the anonymous (heap, stacks) and file-backed (the mapped
// binary) parts of the current RSS in kB.
func (p *controllerProc) rssParts() (anon, file int64) {
	kb, err := kBFields(fmt.Sprintf("/proc/%d/status", p.pid), "RssAnon:", "RssFile:")
	if err != nil {
		return 0, 0
	}
	return kb[0], kb[1]
}

// memory returns VmHWM (peak RSS) and VmRSS in kB from /proc/PID/status.
func (p *controllerProc) memory() (hwm, rss int64, err error) {
	kb, err := kBFields(fmt.Sprintf("/proc/%d/status", p.pid), "VmHWM:", "VmRSS:")
	if err != nil {
		return 0, 0, err
	}
	if kb[0] == 0 {
		return 0, 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.pid)
	}
	return kb[0], kb[1], nil
}

// kBFields returns the values of the named "Name: value kB" lines of a /proc
// file (status, meminfo), 0 for a name it lacks.
func kBFields(path string, names ...string) ([]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(names))
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		if i := slices.Index(names, f[0]); i >= 0 {
			out[i], _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return out, nil
}

// procFigures are a controller process's totals.
type procFigures struct {
	hwm, rss   int64 // kB: VmHWM, VmRSS
	anon, file int64 // kB: RssAnon, RssFile
	sampled    int64 // kB: largest VmRSS sampled
	cpu        float64
}

func (p *controllerProc) totals() procFigures {
	var t procFigures
	t.hwm, t.rss, _ = p.memory()
	t.anon, t.file = p.rssParts()
	t.cpu, _ = p.cpuSeconds()
	t.sampled = p.sampledMaxRSSKB()
	return t
}

// cpuSeconds returns user + system CPU time from /proc/PID/stat.
func (p *controllerProc) cpuSeconds() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...: fields after the last ')' start at field 3.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", p.pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", p.pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat", p.pid)
	}
	return float64(utime+stime) / clockTicks, nil
}

func (p *controllerProc) get(path string) ([]byte, error) {
	if p.addr == "" {
		return nil, fmt.Errorf("GET %s: a helper has no metrics port", path)
	}
	return p.fetch(httpClient, path)
}

// fetch GETs path from the metrics port; anything but 200 is an error.
func (p *controllerProc) fetch(client *http.Client, path string) ([]byte, error) {
	resp, err := client.Get("http://" + p.addr + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

// metrics returns the controller's /metrics text.
func (p *controllerProc) metrics() (string, error) {
	b, err := p.get("/metrics")
	return string(b), err
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 30 s).
func (p *controllerProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within 30s of SIGTERM", filepath.Base(p.cmd.Path))
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("%s exited with %d:\n%s", filepath.Base(p.cmd.Path), code, p.logTail(20))
	}
	return nil
}

func (p *controllerProc) logTail(n int) string {
	s, err := testcluster.TailFile(p.logPath, n)
	if err != nil {
		return err.Error()
	}
	return s
}

// cpuProfile fetches a CPU profile of the given length as soon as the metrics
// port answers, saves it and returns its top functions.
func (p *controllerProc) cpuProfile(file string, length time.Duration) string {
	if err := p.waitPort(30 * time.Second); err != nil {
		return fmt.Sprintf("CPU profile: metrics port never answered: %v\n", err)
	}
	client := &http.Client{Timeout: length + 30*time.Second}
	b, err := p.fetch(client, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(length.Seconds())))
	if err != nil {
		return fmt.Sprintf("CPU profile: %v\n", err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return err.Error() + "\n"
	}
	return pprofTop(file, []string{"-top", "-nodecount=25"}, []string{"-top", "-cum", "-nodecount=40"})
}

// waitPort waits until the metrics port accepts connections: polled every
// 5 ms, so that the profile misses as little of the sync as it can.
func (p *controllerProc) waitPort(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pprofTop runs go tool pprof once per argument list on a saved profile and
// returns the outputs, each under the command that produced it.
func pprofTop(file string, argLists ...[]string) string {
	var out string
	for _, args := range argLists {
		cmd := exec.Command("go", append(append([]string{"tool", "pprof"}, args...), file)...)
		b, err := cmd.CombinedOutput()
		out += fmt.Sprintf("$ go tool pprof %s %s\n%s", strings.Join(args, " "), filepath.Base(file), b)
		if err != nil {
			out += err.Error() + "\n"
		}
		out += "\n"
	}
	return out
}
