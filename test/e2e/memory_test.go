package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/test/budgets"
)

// Annotation keys of the memory guard's own controller, so the suite's
// controller leaves its workloads alone.
const (
	memoryOptIn     = "e2e.restart-controller/memory"
	memoryApplied   = "e2e.restart-controller/memory-applied"
	memoryTemplate  = "e2e.restart-controller/memory-template"
	memoryTimestamp = "e2e.restart-controller/memory-timestamp"
)

// TestMemoryAgainstFloor is the memory guard: in a fixed small scenario (five
// Deployments, each reading a ConfigMap and a Secret, one restart) the
// controller's peak RSS stays within its budget of that of the floor
// program, what any such controller needs on the same client-go parts
// (test/floor). Both are built here with the release flags, so their
// binaries are of the same age (a binary file just written maps more of
// itself than later), and both watch only this test's namespace, so the
// shared cluster's other objects do not count. Memory, unlike timing, is steady enough on a busy machine for a
// ratio to be a test (1.17 to 1.18 in three runs); timing stays in `make
// bench`. Sources large enough to matter are the bench's scale scenario:
// here their decoding would make the floor's own peak, at Go's default GC
// target, vary more than the budget's margin.
func TestMemoryAgainstFloor(t *testing.T) {
	b, err := budgets.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=memory-guard",
		"-o", bin+string(filepath.Separator), "./cmd/restart-controller", "./test/floor")
	build.Dir = env.repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the controller and the floor: %v\n%s", err, out)
	}

	ns := newNamespace(t)
	const n = 5
	for i := range n {
		createConfigMap(t, ns, fmt.Sprintf("config-%d", i), map[string]string{"color": "blue", "size": "L"})
		createSecret(t, ns, fmt.Sprintf("secret-%d", i), map[string]string{"password": fmt.Sprintf("pw-%d", i)})
		createDeployment(t, ns, fmt.Sprintf("app-%d", i), podSpec(t, fmt.Sprintf(`
containers:
- name: app
  image: example.com/app:1
  envFrom: [{configMapRef: {name: config-%[1]d}}]
  env: [{name: PW, valueFrom: {secretKeyRef: {name: secret-%[1]d, key: password}}}]
`, i)), workloadOptions{replicas: 1})
		annotate(t, ns, fmt.Sprintf("app-%d", i), memoryOptIn, "enabled")
	}

	floor := startFloor(t, filepath.Join(bin, "floor"), ns)

	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`namespaces: [%s]
annotations:
  optIn: %s
  appliedChecksums: %s
  appliedTemplateHash: %s
  restartTimestamp: %s
`, ns, memoryOptIn, memoryApplied, memoryTemplate, memoryTimestamp)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctrl, err := env.startControllerAs(ctx, controllerRun{
		name: "memory", kubeconfig: env.cluster.Kubeconfig, configFile: config, binary: filepath.Join(bin, "restart-controller"),
		args: []string{"--restart-grace-period", "0s", "--restart-check-period", "100", "--leader-election-namespace", ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrl.Stop)
	logTailOnFailure(t, "memory", &ctrl)

	// Every workload recorded, then one restart: the controller's whole path.
	for i := range n {
		waitAnnotation(t, ns, fmt.Sprintf("app-%d", i), memoryApplied, false)
	}
	setConfigMapKey(t, ns, "config-0", "color", "green")
	waitAnnotation(t, ns, "app-0", memoryTimestamp, true)

	c, err := readMemory(ctrl.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	f, err := readMemory(floor.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ratio := float64(c.peakKB) / float64(f.peakKB)
	t.Logf("peak RSS: controller %s; floor %s; ratio %.2f (budget %.2f)", c, f, ratio, b.Memory.MaxPeakRSSRatio)
	if ratio > b.Memory.MaxPeakRSSRatio {
		t.Errorf("the controller's peak RSS is %.2f times the floor's, over its budget of %.2f (test/budgets/budgets.yaml): "+
			"controller %s; floor %s. A large Pss_File means a larger binary (go tool nm -size -sort size); "+
			"a large Pss_Anon, more heap (--enable-profiling, /debug/pprof/heap)", ratio, b.Memory.MaxPeakRSSRatio, c, f)
	}
}

// annotate sets an annotation on a Deployment (not its pod template).
func annotate(t *testing.T, ns, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if _, err := env.kube.AppsV1().Deployments(ns).Patch(ctxFor(t), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotating deployment %s/%s: %v", ns, name, err)
	}
}

// waitAnnotation waits until a Deployment (or, with inTemplate, its pod
// template) has the annotation.
func waitAnnotation(t *testing.T, ns, name, key string, inTemplate bool) {
	t.Helper()
	waitFor(t, fmt.Sprintf("annotation %s on deployment %s/%s", key, ns, name), func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		a := d.Annotations
		if inTemplate {
			a = d.Spec.Template.Annotations
		}
		return a[key] != "", nil
	})
}

// startFloor runs the floor program on ns and waits until its caches have
// synced.
func startFloor(t *testing.T, binary, ns string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "--kubeconfig", env.cluster.Kubeconfig, "--namespaces", ns)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the floor: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") {
				done <- nil
				return
			}
		}
		done <- fmt.Errorf("the floor ended its output without READY: %w", sc.Err())
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	select {
	case err := <-done:
		if err != nil {
			stop()
			t.Fatalf("%v\n%s", err, stderr.String())
		}
	case <-time.After(waitLong):
		stop()
		t.Fatalf("the floor not ready within %s\n%s", waitLong, stderr.String())
	}
	t.Cleanup(stop)
	return cmd
}

// memory is a process's resident memory, read from /proc.
type memory struct {
	peakKB, rssKB, pssFileKB, pssAnonKB int64
}

func (m memory) String() string {
	return fmt.Sprintf("VmHWM %.1f MiB (now VmRSS %.1f MiB: Pss_File %.1f, Pss_Anon %.1f)",
		float64(m.peakKB)/1024, float64(m.rssKB)/1024, float64(m.pssFileKB)/1024, float64(m.pssAnonKB)/1024)
}

// readMemory reads VmHWM and VmRSS from /proc/PID/status, and the
// file-backed and anonymous parts from /proc/PID/smaps_rollup: a binary's
// own pages are file-backed, the heap anonymous.
func readMemory(pid int) (memory, error) {
	var m memory
	fields := map[string]*int64{"VmHWM:": &m.peakKB, "VmRSS:": &m.rssKB, "Pss_File:": &m.pssFileKB, "Pss_Anon:": &m.pssAnonKB}
	for _, file := range []string{"status", "smaps_rollup"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
		if err != nil {
			return m, fmt.Errorf("reading memory of process %d: %w", pid, err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			if p, ok := fields[f[0]]; ok {
				v, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil {
					return m, fmt.Errorf("%s of process %d: %w", f[0], pid, err)
				}
				*p = v
			}
		}
	}
	for name, p := range fields {
		if *p == 0 {
			return m, fmt.Errorf("no %s for process %d", name, pid)
		}
	}
	return m, nil
}
