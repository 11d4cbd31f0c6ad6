package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/migrate"
)

// The shim's environment, set by run.
const (
	envShimDir    = "RC_SHIM_DIR"    // per-release config, pid and log files
	envController = "RC_CONTROLLER"  // the restart-controller binary
	envAnnotation = "RC_RESTART_KEY" // the restart annotation the suites wait for
	envOpenShift  = "RC_OPENSHIFT"   // "1": the cluster serves DeploymentConfigs
)

// helmArgs is what the shim reads of a helm command line.
type helmArgs struct {
	verb, release, namespace string
	sets                     []string
	timeout                  time.Duration
}

func parseHelm(args []string) (helmArgs, error) {
	h := helmArgs{timeout: 3 * time.Minute}
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() string {
			if _, v, ok := strings.Cut(a, "="); ok {
				return v
			}
			i++
			if i < len(args) {
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--namespace" || a == "-n" || strings.HasPrefix(a, "--namespace="):
			h.namespace = value()
		case a == "--set" || strings.HasPrefix(a, "--set="):
			h.sets = append(h.sets, value())
		case a == "--timeout" || strings.HasPrefix(a, "--timeout="):
			if d, err := time.ParseDuration(value()); err == nil {
				h.timeout = d
			}
		case strings.HasPrefix(a, "-"):
			// --install, --wait, --create-namespace, --reset-values,
			// --ignore-not-found: what the shim does anyway.
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) < 2 {
		return h, fmt.Errorf("helm %s: want a command and a release", strings.Join(args, " "))
	}
	h.verb, h.release = positional[0], positional[1]
	return h, nil
}

// shim acts as `helm upgrade --install` and `helm uninstall` of Reloader.
func shim(ctx context.Context, args []string) error {
	h, err := parseHelm(args)
	if err != nil {
		return err
	}
	cs, err := client()
	if err != nil {
		return err
	}
	dir := os.Getenv(envShimDir)
	switch h.verb {
	case "upgrade", "install":
		return install(ctx, cs, dir, h)
	case "uninstall", "delete":
		stopController(filepath.Join(dir, h.release+".pid"))
		return deleteStandIn(ctx, cs, h)
	}
	return fmt.Errorf("helm %s: not something the shim does", h.verb)
}

func client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return nil, fmt.Errorf("reading KUBECONFIG: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

func install(ctx context.Context, cs *kubernetes.Clientset, dir string, h helmArgs) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", h.namespace, err)
	}
	cfgPath := filepath.Join(dir, h.release+".yaml")
	if err := writeConfig(cfgPath, h); err != nil {
		return err
	}
	pidPath := filepath.Join(dir, h.release+".pid")
	stopController(pidPath)
	port, err := freePort()
	if err != nil {
		return err
	}
	if err := startController(dir, h, cfgPath, pidPath, port); err != nil {
		return err
	}
	if err := createStandIn(ctx, cs, h); err != nil {
		return err
	}
	return waitReady(ctx, port, h.timeout)
}

// graceForSuites is the grace period the suites are run with. Their specs
// read a workload's restart annotation as the "prior" value after their
// update returns (positive specs), or after a 3 s sleep (negative ones:
// NegativeTestWait), then wait up to 15 s or 5 s for it to change. A
// restart within 3 s of the update therefore either lands before a
// positive spec reads its prior value (a false failure) or before a
// negative spec does (a false pass: a wrong restart goes unseen). 4 s puts
// every restart after both reads and inside both windows, so each spec
// decides what it claims to.
const graceForSuites = 4 * time.Second

// writeConfig migrates the --set values and sets the restart annotation
// the suites wait for, and the grace period they can observe.
func writeConfig(path string, h helmArgs) error {
	v := migrate.Values{}
	for _, s := range h.sets {
		if err := v.Set(s); err != nil {
			return err
		}
	}
	o, err := migrate.FromHelmValues(v, h.namespace)
	if err != nil {
		return err
	}
	// The suites never set reloader.isOpenshift; Reloader's releases that
	// restarted DeploymentConfigs found OpenShift's API by themselves, and
	// so does the shim (migrate --openshift).
	o.IsOpenshift = o.IsOpenshift || os.Getenv(envOpenShift) == "1"
	res, err := migrate.Config(o, true)
	if err != nil {
		return err
	}
	tree := map[string]any{}
	if err := yaml.Unmarshal(res.File, &tree); err != nil {
		return fmt.Errorf("reading the migrated config: %w", err)
	}
	ann, _ := tree["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		tree["annotations"] = ann
	}
	ann["restartTimestamp"] = os.Getenv(envAnnotation)
	tree["restartGracePeriod"] = graceForSuites.String()
	out, err := yaml.Marshal(tree)
	if err != nil {
		return fmt.Errorf("writing the config: %w", err)
	}
	var notes strings.Builder
	for _, f := range res.Findings {
		fmt.Fprintf(&notes, "# %s\n", f)
	}
	return os.WriteFile(path, append([]byte(notes.String()), out...), 0o644)
}

func startController(dir string, h helmArgs, cfgPath, pidPath string, port int) error {
	logf, err := os.OpenFile(filepath.Join(dir, h.release+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the controller's log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Getenv(envController), "--kubeconfig", os.Getenv("KUBECONFIG"), "--config", cfgPath,
		"--metrics-address", "127.0.0.1:"+strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+h.namespace)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: it outlives this helm process, as a release does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting restart-controller: %w", err)
	}
	return os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// stopController stops the release's controller, if one runs.
func stopController(pidPath string) {
	data, err := os.ReadFile(pidPath)
	if err != nil {
		return
	}
	_ = os.Remove(pidPath)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func standInName(release string) string { return release + "-reloader" }

// createStandIn creates the Deployment the suites wait for; kwok runs its
// pod, so it becomes ready as Reloader's would.
func createStandIn(ctx context.Context, cs *kubernetes.Clientset, h helmArgs) error {
	labels := map[string]string{"app": standInName(h.release)}
	one := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: standInName(h.release), Namespace: h.namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "stand-in", Image: "restart-controller.invalid/stand-in"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(h.namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the stand-in Deployment: %w", err)
	}
	return nil
}

func deleteStandIn(ctx context.Context, cs *kubernetes.Clientset, h helmArgs) error {
	err := cs.AppsV1().Deployments(h.namespace).Delete(ctx, standInName(h.release), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the stand-in Deployment: %w", err)
	}
	return nil
}

// waitReady waits for the controller's /readyz: its caches have synced.
func waitReady(ctx context.Context, port int, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("restart-controller did not become ready (see its log in the shim's directory)")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
