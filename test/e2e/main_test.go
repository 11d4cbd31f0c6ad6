// Package e2e runs the controller binary against a real control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and
// counts real restarts: generation bumps, new ReplicaSets, replaced pods.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// suite is shared by every test: one cluster, one controller binary, and one
// controller process watching the whole cluster with examples/config.yaml.
type suite struct {
	cluster    *testcluster.Cluster
	kube       kubernetes.Interface
	dynamic    dynamic.Interface
	binary     string
	plugin     string // kubectl-restart_controller, the operator CLI
	repoRoot   string
	workDir    string
	controller *controllerProcess
}

var env *suite

// graceForTests is short so the suite is quick; the grace period itself is
// still exercised (merging five changes, two configs, and so on).
const graceForTests = "2s"

func TestMain(m *testing.M) {
	flag.Parse()
	setParallelism()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(runSuite(m))
}

// parallelTests is how many parallel tests run at once unless -parallel is
// given. Each test has its own namespace (and, if it runs its own controller,
// its own annotation keys), and what they do is mostly wait for grace periods
// and the control plane, not compute, so the default of GOMAXPROCS (2 on a
// small machine) would leave the wall clock to waiting.
const parallelTests = 8

func setParallelism() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", fmt.Sprint(parallelTests))
	}
}

func runSuite(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := setUp(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e set-up failed:", err)
		if s != nil && s.cluster != nil {
			fmt.Fprintln(os.Stderr, s.cluster.LogTail(40))
			_ = s.cluster.Stop()
		}
		return 1
	}
	env = s
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "--- controller log tail ---")
		fmt.Fprintln(os.Stderr, s.controller.LogTail(80))
		fmt.Fprintln(os.Stderr, "--- cluster log tail ---")
		fmt.Fprintln(os.Stderr, s.cluster.LogTail(20))
	}
	s.controller.Stop()
	if err := s.cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping cluster:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(s.workDir)
	} else {
		fmt.Fprintln(os.Stderr, "e2e logs kept in", s.workDir)
	}
	return code
}

func setUp(ctx context.Context) (*suite, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "restart-controller-e2e-")
	if err != nil {
		return nil, err
	}
	s := &suite{repoRoot: root, workDir: work, binary: filepath.Join(work, "restart-controller"),
		plugin: filepath.Join(work, "kubectl-restart_controller")}
	// One go build for both: they share most packages.
	build := exec.CommandContext(ctx, "go", "build", "-o", work+string(filepath.Separator),
		"./cmd/restart-controller", "./cmd/kubectl-restart_controller")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return s, fmt.Errorf("building the controller and its plugin: %w\n%s", err, out)
	}
	s.cluster, err = testcluster.Start(ctx, testcluster.Options{
		Dir: filepath.Join(work, "cluster"),
		Log: func(format string, args ...any) { fmt.Printf("e2e: "+format+"\n", args...) },
	})
	if err != nil {
		return s, fmt.Errorf("starting cluster: %w", err)
	}
	if s.kube, err = kubernetes.NewForConfig(s.cluster.RESTConfig); err != nil {
		return s, err
	}
	if s.dynamic, err = dynamic.NewForConfig(s.cluster.RESTConfig); err != nil {
		return s, err
	}
	// xing's preset is the built-in default (examples/config.yaml, a unit
	// test keeps them equal): every test on the suite's controller runs it.
	s.controller, err = s.startController(ctx, "suite", filepath.Join(root, "examples", "presets", "xing.yaml"),
		"--restart-grace-period", graceForTests, "--restart-check-period", "100")
	if err != nil {
		return s, err
	}
	return s, nil
}
