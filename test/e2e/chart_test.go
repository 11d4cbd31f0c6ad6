package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/charts"
	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// crdKinds are chart objects whose CRDs (prometheus-operator's) the local
// cluster does not have; the render tests in ./charts check them instead.
var crdKinds = []string{"ServiceMonitor", "PrometheusRule"}

// TestChartInstall installs the Helm chart's rendered objects server-side,
// runs the controller binary as the chart's ServiceAccount (a token from the
// TokenRequest API, in a kubeconfig of its own) with the chart's config and
// arguments, and shows a ConfigMap change restarts an opted-in Deployment:
// the chart's RBAC is enough. Then it drops patch from the chart's role and
// shows the next change is refused, proving the process ran with exactly
// those rights and not the suite's admin token.
func TestChartInstall(t *testing.T) {
	for _, c := range []struct {
		name   string
		values func(appNS string) map[string]interface{}
	}{
		// The defaults: two replicas with leader election, cluster-wide RBAC.
		{"cluster", func(string) map[string]interface{} { return map[string]interface{}{} }},
		// Namespaced RBAC for the app's namespace only, one replica without
		// leader election, and the optional objects on.
		{"namespaced", func(appNS string) map[string]interface{} {
			return map[string]interface{}{
				"rbac":             map[string]interface{}{"scope": "namespaced", "namespaces": []interface{}{appNS}},
				"replicaCount":     1,
				"leaderElection":   map[string]interface{}{"enabled": false},
				"networkPolicy":    map[string]interface{}{"enabled": true},
				"grafanaDashboard": map[string]interface{}{"enabled": true},
				"serviceMonitor":   map[string]interface{}{"enabled": true},
				"prometheusRule":   map[string]interface{}{"enabled": true},
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) { testChartInstall(t, c.name, c.values) })
	}
}

func testChartInstall(t *testing.T, variant string, variantValues func(string) map[string]interface{}) {
	ctx := ctxFor(t)
	releaseNS, appNS := newNamespace(t), newNamespace(t)
	release := "chart-" + variant
	// Keys of its own, so the suite's controller (default keys, every
	// namespace) never restarts this test's workload for it.
	keys := keysFor("chart-" + variant)

	values := variantValues(appNS)
	values["config"] = map[string]interface{}{"annotations": map[string]interface{}{
		"optIn": keys.optIn, "appliedChecksums": keys.applied,
		"restartTimestamp": keys.timestamp, "appliedTemplateHash": keys.templateHash,
	}}
	values["nodeSelector"] = map[string]interface{}{testcluster.NodeLabelKey: testcluster.NodeLabelValue}
	valuesFile := writeYAML(t, release+"-values.yaml", values)

	// The first run builds helm from its Go module (minutes), hence its own deadline.
	buildCtx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	helm, err := charts.Helm(buildCtx)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := charts.Render(ctx, helm, charts.Chart(env.repoRoot), release, releaseNS, "-f", valuesFile)
	if err != nil {
		t.Fatal(err)
	}

	// Apply everything the cluster has a kind for, server-side.
	var apply []string
	var skipped []string
	for _, o := range objs {
		if slices.Contains(crdKinds, o.Kind()) {
			skipped = append(skipped, o.Kind()+"/"+o.Name())
			continue
		}
		b, err := yaml.Marshal(map[string]interface{}(o))
		if err != nil {
			t.Fatal(err)
		}
		apply = append(apply, string(b))
		if o.Kind() == "ClusterRole" || o.Kind() == "ClusterRoleBinding" {
			kind, name := strings.ToLower(o.Kind()), o.Name()
			t.Cleanup(func() { _, _ = env.cluster.Kubectl(context.Background(), "delete", kind, name, "--ignore-not-found") })
		}
	}
	manifest := filepath.Join(env.workDir, release+"-rendered.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Join(apply, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := env.cluster.Kubectl(ctx, "apply", "--server-side", "--field-manager=helm-e2e", "-f", manifest)
	if err != nil {
		t.Fatalf("kubectl apply --server-side: %v\n%s", err, out)
	}
	t.Logf("applied %d rendered objects (skipped %v, no CRD here):\n%s", len(apply), skipped, out)

	// The chart's Deployment, as rendered: its ServiceAccount, config and arguments.
	var dep appsv1.Deployment
	var configText string
	for _, o := range objs {
		switch {
		case o.Kind() == "Deployment":
			if err := o.Into(&dep); err != nil {
				t.Fatal(err)
			}
		case o.Kind() == "ConfigMap" && strings.HasSuffix(o.Name(), "-config"):
			data, _ := o["data"].(map[string]interface{})
			configText, _ = data["config.yaml"].(string)
		}
	}
	if dep.Name == "" || configText == "" {
		t.Fatal("the chart rendered no Deployment or no config")
	}
	// Its pods schedule and become available (kwok runs them; the image is not pulled).
	waitFor(t, "the chart's Deployment available", func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(releaseNS).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.AvailableReplicas != *dep.Spec.Replicas {
			return false, fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, *dep.Spec.Replicas)
		}
		return true, nil
	})

	// The token of the chart's ServiceAccount, as a pod of the chart would have.
	sa := dep.Spec.Template.Spec.ServiceAccountName
	kubeconfig, saConfig := serviceAccountKubeconfig(t, releaseNS, sa)
	saClient, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	review, err := saClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + releaseNS + ":" + sa; review.Status.UserInfo.Username != want {
		t.Fatalf("the kubeconfig authenticates as %q, want %q", review.Status.UserInfo.Username, want)
	}

	// Run the binary the way the chart's container runs it.
	configFile := filepath.Join(env.workDir, release+"-config.yaml")
	if err := os.WriteFile(configFile, []byte(configText), 0o644); err != nil {
		t.Fatal(err)
	}
	container := dep.Spec.Template.Spec.Containers[0]
	args := []string{"--kubeconfig", kubeconfig, // after startController's: the last one counts
		"--restart-grace-period", graceForTests, "--restart-check-period", "100"}
	for _, a := range container.Args {
		if !strings.HasPrefix(a, "--config=") { // startController passes the file
			args = append(args, a)
		}
	}
	// What POD_NAME and POD_NAMESPACE give the pod through the downward API:
	// its own namespace holds the Lease and the checksum key Secret.
	args = append(args, "--leader-election-namespace", releaseNS)
	if slices.Contains(container.Args, "--leader-elect") {
		args = append(args, "--leader-election-identity", release+"-0")
	}
	p, err := env.startController(ctx, release, configFile, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("chart controller log tail:\n%s", p.LogTail(60))
		}
	})
	waitFor(t, "the controller to lead", func() (bool, error) {
		v, err := p.Metric("restart_controller_leader")
		return v == 1, err
	})

	// An opted-in Deployment reading a ConfigMap restarts when it changes.
	createConfigMap(t, appNS, "app-config", map[string]string{"k": "v1"})
	replicas := int32(1)
	app := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: labelsFor("app"), Annotations: map[string]string{keys.optIn: "enabled"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("app")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("app")},
				Spec: podSpec(t, `
containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: app-config}}]}]`),
			},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(appNS).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the app's checksums recorded by the chart's controller", func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(appNS).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Annotations[keys.applied] != "", err
	})
	setConfigMapKey(t, appNS, "app-config", "k", "v2")
	var stamp string
	waitFor(t, "the app restarted: a timestamp in its pod template and a second ReplicaSet", func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(appNS).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		stamp = d.Spec.Template.Annotations[keys.timestamp]
		rss, err := env.kube.AppsV1().ReplicaSets(appNS).List(ctx, metav1.ListOptions{LabelSelector: "app=app"})
		if err != nil {
			return false, err
		}
		if stamp == "" || len(rss.Items) != 2 {
			return false, fmt.Errorf("timestamp %q, %d replicasets", stamp, len(rss.Items))
		}
		return true, nil
	})
	t.Logf("%s: the controller, as %s, restarted %s/app (timestamp %s)", variant, review.Status.UserInfo.Username, appNS, stamp)

	// Take patch on Deployments away from the chart's role: the next change
	// must fail as persistent (forbidden) and restart nothing.
	dropVerb(t, ctx, objs, appNS, "apps", "deployments", "patch")
	before, _ := persistentErrors(p)
	setConfigMapKey(t, appNS, "app-config", "k", "v3")
	waitFor(t, "a persistent (forbidden) patch failure", func() (bool, error) {
		n, err := persistentErrors(p)
		return n > before, err
	})
	d, err := env.kube.AppsV1().Deployments(appNS).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Annotations[keys.timestamp]; got != stamp {
		t.Fatalf("restarted without patch rights (timestamp %q -> %q): the controller does not run as the chart's ServiceAccount", stamp, got)
	}
}

func persistentErrors(p *controllerProcess) (float64, error) {
	families, err := p.scrape()
	if err != nil {
		return 0, err
	}
	v, _, err := metricSum(families, "restart_controller_reconcile_errors_total", `reason="persistent"`)
	return v, err
}

// dropVerb removes verb on group/resource from the chart's ClusterRole, or
// from its Role in appNS when the RBAC is namespaced.
func dropVerb(t *testing.T, ctx context.Context, objs []charts.Object, appNS, group, resource, verb string) {
	t.Helper()
	strip := func(rules []rbacv1.PolicyRule) {
		for i, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
				rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			}
		}
	}
	for _, o := range objs {
		var err error
		switch {
		case o.Kind() == "ClusterRole":
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				r, err := env.kube.RbacV1().ClusterRoles().Get(ctx, o.Name(), metav1.GetOptions{})
				if err != nil {
					return err
				}
				strip(r.Rules)
				_, err = env.kube.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{})
				return err
			})
		case o.Kind() == "Role" && o.Namespace() == appNS:
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				r, err := env.kube.RbacV1().Roles(appNS).Get(ctx, o.Name(), metav1.GetOptions{})
				if err != nil {
					return err
				}
				strip(r.Rules)
				_, err = env.kube.RbacV1().Roles(appNS).Update(ctx, r, metav1.UpdateOptions{})
				return err
			})
		default:
			continue
		}
		if err != nil {
			t.Fatalf("dropping %s on %s from %s %s: %v", verb, resource, o.Kind(), o.Name(), err)
		}
		return
	}
	t.Fatal("no ClusterRole, nor a Role in the app's namespace, rendered")
}

func writeYAML(t *testing.T, name string, v interface{}) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(env.workDir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
