package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// controllerProcess is the controller binary running as a real process, so
// tests see exactly what an operator runs, signals included.
type controllerProcess struct {
	cmd     *exec.Cmd
	logPath string
	metrics string // host:port
	done    chan struct{}
}

// startController runs the binary with the suite's kubeconfig and the given
// config file and flags, and waits until /readyz answers.
func (s *suite) startController(ctx context.Context, name, configFile string, args ...string) (*controllerProcess, error) {
	return s.startControllerAs(ctx, controllerRun{name: name, kubeconfig: s.cluster.Kubeconfig, configFile: configFile, args: args})
}

// controllerRun is how a test runs the controller.
type controllerRun struct {
	name       string
	kubeconfig string
	configFile string
	env        []string // KEY=value, on top of this process' environment
	args       []string
	binary     string // empty: the suite's build
}

// startControllerAs runs the controller with its own identity (kubeconfig)
// and environment (POD_NAME, POD_NAMESPACE), and waits until /readyz
// answers 200.
func (s *suite) startControllerAs(ctx context.Context, r controllerRun) (*controllerProcess, error) {
	ports, err := testcluster.FreePorts(1)
	if err != nil {
		return nil, err
	}
	p := &controllerProcess{
		logPath: filepath.Join(s.workDir, "controller-"+r.name+".log"),
		metrics: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		done:    make(chan struct{}),
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig", r.kubeconfig, "--config", r.configFile, "--metrics-address", p.metrics, "--verbose"}, r.args...)
	binary := s.binary
	if r.binary != "" {
		binary = r.binary
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), r.env...)
	p.cmd.Stdout = logFile
	p.cmd.Stderr = logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting controller: %w", err)
	}
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := p.ready(); err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("controller exited during start-up:\n%s", p.LogTail(40))
		case <-ctx.Done():
			p.Kill()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("controller not ready within 60s (a degraded kind must not hold up the others):\n%s", p.LogTail(40))
		}
	}
}

func (p *controllerProcess) ready() error {
	resp, err := http.Get("http://" + p.metrics + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// Stop sends SIGTERM and waits for a clean exit.
func (p *controllerProcess) Stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.Kill()
	}
}

// Kill sends SIGKILL: no shutdown code runs.
func (p *controllerProcess) Kill() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// ExitCode is valid after the process ended.
func (p *controllerProcess) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// logTailOnFailure logs the tail of the log of the process *p points to when
// the test fails (a pointer, as tests replace killed processes).
func logTailOnFailure(t *testing.T, name string, p **controllerProcess) {
	t.Cleanup(func() {
		if t.Failed() && *p != nil {
			t.Logf("--- %s controller log tail ---\n%s", name, (*p).LogTail(60))
		}
	})
}

func (p *controllerProcess) LogTail(n int) string {
	s, err := testcluster.TailFile(p.logPath, n)
	if err != nil {
		return err.Error()
	}
	return s
}

// Metric returns the sum of every sample of the named metric (all label sets).
func (p *controllerProcess) Metric(name string) (float64, error) {
	families, err := p.scrape()
	if err != nil {
		return 0, err
	}
	v, found, err := metricSum(families, name)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("metric %s not exposed", name)
	}
	return v, nil
}
