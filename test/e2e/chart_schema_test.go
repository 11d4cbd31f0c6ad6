package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/charts"
)

// TestChartInstallRefusesBadValues runs the installs docs/operations.md
// shows failing (a value of the wrong type, a misplaced key) with helm
// against the cluster: each fails with exactly the output shown there, and
// before anything is created: not even the namespace it was asked to
// create, nor the release's cluster-wide objects.
func TestChartInstallRefusesBadValues(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	examples, err := charts.ReadExamples(env.repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 2 {
		t.Fatalf("docs/operations.md shows %d failing installs, want the wrong type and the misplaced key", len(examples))
	}
	buildCtx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	helm, err := charts.Helm(buildCtx)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir() // helm's cache and config, not the user's
	for i, ex := range examples {
		ns := fmt.Sprintf("e2e-helm-refused-%d", i) // never created, so never taken
		release := "refused"
		args := append([]string{"install", release, charts.Chart(env.repoRoot), "-n", ns, "--create-namespace",
			"--kubeconfig", env.cluster.Kubeconfig}, ex.Args...)
		cmd := exec.CommandContext(ctx, helm, args...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err == nil {
			t.Errorf("helm install %s succeeded:\n%s", ex.Args, stdout.String())
			_ = exec.Command(helm, "uninstall", release, "-n", ns, "--kubeconfig", env.cluster.Kubeconfig).Run()
			_, _ = env.cluster.Kubectl(context.Background(), "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
			continue
		}
		// Helm may warn first (e.g. of a group-readable kubeconfig).
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n") {
			if !strings.HasPrefix(l, "WARNING: ") {
				lines = append(lines, l)
			}
		}
		if got := strings.Join(lines, "\n"); got != ex.Output {
			t.Errorf("helm install %s says\n%s\ndocs/operations.md shows\n%s", ex.Args, got, ex.Output)
		}
		if _, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("helm install %s created namespace %s (or: %v)", ex.Args, ns, err)
			_, _ = env.cluster.Kubectl(context.Background(), "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
		}
		name := release + "-restart-controller"
		if _, err := env.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("helm install %s created ClusterRole %s (or: %v)", ex.Args, name, err)
		}
	}
}
