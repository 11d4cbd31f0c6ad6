package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// restartKey is the pod-template annotation Reloader's suites wait for.
const restartKey = "reloader.stakater.com/last-reloaded-from"

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reloader-e2e", flag.ContinueOnError)
	suites := fs.String("suites", "core,annotations,flags,advanced,argo,csi", "Reloader's suites to run (directories of test/e2e)")
	workdir := fs.String("workdir", "", "where the cluster, binaries, logs and reports go (default: a new temporary directory)")
	focus := fs.String("focus", "", "a ginkgo focus regexp, to run some specs only")
	attempts := fs.Int("attempts", 2, "attempts per spec (ginkgo's flake-attempts); a spec that passes only on a later one is reported as such")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: go run ./hack/reloader-e2e [--suites a,b] [--workdir DIR] RELOADER_SRC")
	}
	src, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return err
	}
	dir := *workdir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "reloader-e2e-"); err != nil {
			return err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	fmt.Println("work directory:", dir)
	env, err := prepare(ctx, dir, src)
	if err != nil {
		return err
	}
	cluster, err := testcluster.Start(ctx, testcluster.Options{Dir: filepath.Join(dir, "cluster"), Log: func(f string, a ...any) { fmt.Printf(f+"\n", a...) }})
	if err != nil {
		return fmt.Errorf("starting the local cluster: %w", err)
	}
	defer cluster.Stop()
	env = append(env, "KUBECONFIG="+cluster.Kubeconfig)
	if slices.Contains(strings.Split(*suites, ","), "argo") {
		// No Argo Rollouts controller runs here: a stand-in writes the
		// status the suite waits for (argo.go).
		if err := argoStandIn(ctx, cluster.Kubeconfig); err != nil {
			return err
		}
	}
	// Nor OpenShift: its DeploymentConfig API is a CRD, and a stand-in
	// writes what its controller would (openshift.go). The suites' specs of
	// DeploymentConfigs run where the API is served, and the shim
	// configures the kind, as Reloader's releases that restarted them found
	// OpenShift by themselves.
	if err := openshiftStandIn(ctx, cluster.Kubeconfig); err != nil {
		return err
	}
	env = append(env, envOpenShift+"=1")
	var results []suiteResult
	for _, suite := range strings.Split(*suites, ",") {
		r, err := runSuite(ctx, dir, src, suite, *focus, *attempts, env)
		if err != nil {
			return err
		}
		results = append(results, r)
		stopAll(filepath.Join(dir, "shim"))
	}
	summary := summarize(results)
	fmt.Print(summary)
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(summary), 0o644)
}

// prepare builds the binaries (the shim is this program, named helm) and
// the module file Reloader's suites are built with; it returns their
// environment.
func prepare(ctx context.Context, dir, src string) ([]string, error) {
	bin := filepath.Join(dir, "bin")
	shimDir := filepath.Join(dir, "shim")
	for _, d := range []string{bin, shimDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	root, err := testcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	for out, pkg := range map[string]string{"restart-controller": "./cmd/restart-controller", "helm": "./hack/reloader-e2e"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, out), pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	if err := modfile(ctx, dir, src); err != nil {
		return nil, err
	}
	return append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		envShimDir+"="+shimDir,
		envController+"="+filepath.Join(bin, "restart-controller"),
		envAnnotation+"="+restartKey,
		"GOFLAGS=-mod=mod",
	), nil
}

// modfile copies Reloader's go.mod and go.sum beside the reports, adding
// the openshift/api replace when OPENSHIFT_API names a source directory;
// the suites are built with -modfile, so Reloader's checkout is not
// changed.
func modfile(ctx context.Context, dir, src string) error {
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return fmt.Errorf("reading Reloader's %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "reloader."+strings.TrimPrefix(name, "go.")), data, 0o644); err != nil {
			return err
		}
	}
	api := os.Getenv("OPENSHIFT_API")
	if api == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "edit", "-modfile="+filepath.Join(dir, "reloader.mod"), "-replace", "github.com/openshift/api="+api)
	cmd.Dir, cmd.Stderr = src, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("adding the openshift/api replace: %w", err)
	}
	return nil
}

// suiteResult is one suite's specs, by outcome.
type suiteResult struct {
	name   string
	counts map[string]int
	failed []string
	// retried passed only on a later attempt: a timing race of the spec
	// (e.g. a restart landing before the spec reads its "prior" value),
	// listed so that it is seen, not counted as a plain pass.
	retried []string
	elapsed time.Duration
	err     string
}

func runSuite(ctx context.Context, dir, src, suite, focus string, attempts int, env []string) (suiteResult, error) {
	report := filepath.Join(dir, suite+".json")
	args := []string{"test", "-modfile=" + filepath.Join(dir, "reloader.mod"), "./test/e2e/" + suite + "/", "-count=1", "-timeout=90m",
		"-args", "-ginkgo.json-report=" + report, "-ginkgo.no-color", fmt.Sprintf("-ginkgo.flake-attempts=%d", attempts)}
	if focus != "" {
		args = append(args, "-ginkgo.focus="+focus)
	}
	logPath := filepath.Join(dir, suite+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return suiteResult{}, err
	}
	defer logf.Close()
	fmt.Printf("suite %s: running (log %s)\n", suite, logPath)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = src, env
	cmd.Stdout, cmd.Stderr = logf, logf
	runErr := cmd.Run()
	r := suiteResult{name: suite, counts: map[string]int{}, elapsed: time.Since(start).Round(time.Second)}
	if err := readReport(report, &r); err != nil {
		r.err = fmt.Sprintf("no report (%v); go test: %v", err, runErr)
	}
	return r, nil
}

// ginkgoReport is what is read of ginkgo's JSON report.
type ginkgoReport struct {
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeText            string
		LeafNodeType            string
		State                   string
		NumAttempts             int
		Failure                 struct{ Message string }
	}
}

func readReport(path string, r *suiteResult) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(data, &reports); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			if s.LeafNodeType != "It" {
				continue
			}
			r.counts[s.State]++
			name := strings.TrimSpace(strings.Join(s.ContainerHierarchyTexts, " ") + " " + s.LeafNodeText)
			if s.State == "passed" && s.NumAttempts > 1 {
				r.retried = append(r.retried, name)
			}
			if s.State != "passed" && s.State != "skipped" && s.State != "pending" {
				msg, _, _ := strings.Cut(strings.TrimSpace(s.Failure.Message), "\n")
				r.failed = append(r.failed, fmt.Sprintf("%s: %s", name, msg))
			}
		}
	}
	return nil
}

func summarize(results []suiteResult) string {
	var b strings.Builder
	b.WriteString("| suite | passed | of which on a retry | failed | skipped | time |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		failed := 0
		for state, n := range r.counts {
			if state != "passed" && state != "skipped" && state != "pending" {
				failed += n
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s |\n", r.name, r.counts["passed"], len(r.retried), failed, r.counts["skipped"]+r.counts["pending"], r.elapsed)
	}
	for _, r := range results {
		if r.err != "" {
			fmt.Fprintf(&b, "\n%s: %s\n", r.name, r.err)
		}
		if len(r.retried) > 0 {
			sort.Strings(r.retried)
			fmt.Fprintf(&b, "\n%s, passed on a retry:\n", r.name)
			for _, f := range r.retried {
				fmt.Fprintf(&b, "- %s\n", f)
			}
		}
		if len(r.failed) > 0 {
			sort.Strings(r.failed)
			fmt.Fprintf(&b, "\n%s, failed:\n", r.name)
			for _, f := range r.failed {
				fmt.Fprintf(&b, "- %s\n", f)
			}
		}
	}
	return b.String()
}

// stopAll stops every controller the shim started (a suite that failed
// before uninstalling leaves one running).
func stopAll(shimDir string) {
	pids, _ := filepath.Glob(filepath.Join(shimDir, "*.pid"))
	for _, p := range pids {
		stopController(p)
	}
}
