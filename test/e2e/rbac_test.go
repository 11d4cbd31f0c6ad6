package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// These tests run the controller as the ServiceAccount of manifests/, with a
// token minted for it, so the RBAC that ships is what the controller gets:
// enough, degraded gracefully when a rule is missing, and, namespaced, enough
// in each namespace. Their controllers use their own opt-in key (the suite's
// controller leaves their workloads alone) but the default checksum, template
// hash and timestamp keys, which the admission guard knows.

const (
	controllerSA = "restart-controller"
	// restartGraceRBAC is short: these tests are about access, not timing.
	restartGraceRBAC = "1s"
)

var daemonSetsResource = `resource="apps/v1, Resource=daemonsets"`

// renderedObject is one document of a kustomize rendering.
type renderedObject struct {
	manifestObject
	yaml string
}

// render returns the documents of `kubectl kustomize dir`.
func render(t *testing.T, dir string) []renderedObject {
	t.Helper()
	out, err := env.cluster.Kubectl(ctxFor(t), "kustomize", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var objects []renderedObject
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o manifestObject
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, doc)
		}
		objects = append(objects, renderedObject{manifestObject: o, yaml: doc})
	}
	return objects
}

func kindsOf(objects []renderedObject, kinds ...string) []renderedObject {
	var out []renderedObject
	for _, o := range objects {
		if slices.Contains(kinds, o.Kind) {
			out = append(out, o)
		}
	}
	return out
}

// rbacKinds are what the tests install from a rendering: who the controller
// is and what it may do, not the Deployment that would run it in a pod.
var rbacKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// applyServerSide applies the objects with `kubectl apply --server-side` as
// the suite's admin, and deletes them when the test ends.
func applyServerSide(t *testing.T, name string, objects []renderedObject) {
	t.Helper()
	docs := make([]string, len(objects))
	for i, o := range objects {
		docs[i] = o.yaml
	}
	path := filepath.Join(env.workDir, name+"-applied.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(objects, func(o renderedObject) bool { return o.Kind == "Namespace" && o.Metadata.Name == manifestsNamespace }) {
		waitNamespaceNotTerminating(t, manifestsNamespace)
	}
	out, err := env.cluster.Kubectl(ctxFor(t), "apply", "--server-side", "--force-conflicts", "-f", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("kubectl apply --server-side:\n%s", out)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := env.cluster.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-f", path); err != nil {
			t.Logf("cleaning up: %v\n%s", err, out)
		}
	})
}

// waitNamespaceNotTerminating waits until the namespace is gone or active: a
// test that deleted it (this file's, or the manifests dry run) may have left
// it terminating, where nothing can be created.
func waitNamespaceNotTerminating(t *testing.T, name string) {
	t.Helper()
	waitFor(t, "namespace "+name+" not terminating", func() (bool, error) {
		ns, err := env.kube.CoreV1().Namespaces().Get(ctxFor(t), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return ns.Status.Phase != corev1.NamespaceTerminating, fmt.Errorf("phase %s", ns.Status.Phase)
	})
}

// serviceAccountKubeconfig mints a token for the ServiceAccount and writes a
// kubeconfig that authenticates with it alone.
func serviceAccountKubeconfig(t *testing.T, namespace, name string) (path string, rc *rest.Config) {
	t.Helper()
	expiry := int64(3600)
	token, err := env.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctxFor(t), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("minting a token for %s/%s: %v", namespace, name, err)
	}
	path = filepath.Join(env.workDir, "kubeconfig-"+namespace+"-"+name+"-"+dnsLabel(t.Name(), 40))
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: e2e, context: {cluster: e2e, user: %s}}]
current-context: e2e
`, env.cluster.RESTConfig.Host, name, token.Status.Token, name)
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if rc, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		t.Fatal(err)
	}
	return path, rc
}

// readyz returns /readyz's status code and body.
func (p *controllerProcess) readyz(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.metrics + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metricWith sums the samples of a metric whose labels contain every given
// `key="value"`; found is false when there is none.
func (p *controllerProcess) metricWith(t *testing.T, name string, labels ...string) (value float64, found bool) {
	t.Helper()
	families, err := p.scrape()
	if err != nil {
		t.Fatal(err)
	}
	value, found, err = metricSum(families, name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return value, found
}

// failedReconciles counts reconciles that failed for any reason but a
// conflict: conflicts are routine (a patch names the cached
// resourceVersion, and kube-controller-manager writes status meanwhile)
// and are decided again on fresh state.
func (p *controllerProcess) failedReconciles(t *testing.T) float64 {
	t.Helper()
	transient, _ := p.metricWith(t, "restart_controller_reconcile_errors_total", `reason="transient"`)
	persistent, _ := p.metricWith(t, "restart_controller_reconcile_errors_total", `reason="persistent"`)
	return transient + persistent
}

func (p *controllerProcess) logContains(s string) bool {
	raw, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(raw), s)
}

// rbacConfig writes examples/config.yaml with the test's opt-in key (the
// other three keys keep their defaults), cluster-wide unless namespaces are
// given, with leader election on a Lease of its own in the manifests'
// namespace when lease is set.
func rbacConfig(t *testing.T, name, optIn, lease string, namespaces ...string) string {
	return writeConfig(t, name, func(cfg map[string]interface{}) {
		cfg["annotations"] = map[string]interface{}{"optIn": optIn}
		ns := []interface{}{}
		for _, n := range namespaces {
			ns = append(ns, n)
		}
		cfg["namespaces"] = ns
		if lease != "" {
			cfg["leaderElection"] = map[string]interface{}{
				"enabled": true, "namespace": manifestsNamespace, "leaseName": lease,
				"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms",
			}
		}
	})
}

// podEnv is what manifests/deployment.yaml gives the controller through the
// downward API: its Pod's name (Events about it, leader identity) and namespace.
func podEnv(pod string) []string {
	return []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + manifestsNamespace}
}

// createReader creates an opted-in Deployment or DaemonSet (one replica)
// reading the ConfigMap through envFrom.
func createReader(t *testing.T, kind, ns, name, optIn, configMap string) {
	t.Helper()
	meta := metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{optIn: "enabled"}}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)},
		Spec:       podSpec(t, fmt.Sprintf(`containers: [{name: app, image: example/app:1, envFrom: [{configMapRef: {name: %s}}]}]`, configMap)),
	}
	selector := &metav1.LabelSelector{MatchLabels: labelsFor(name)}
	var err error
	switch kind {
	case "Deployment":
		one := int32(1)
		_, err = env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), &appsv1.Deployment{ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: selector, Template: template}}, metav1.CreateOptions{})
	case "DaemonSet":
		_, err = env.kube.AppsV1().DaemonSets(ns).Create(ctxFor(t), &appsv1.DaemonSet{ObjectMeta: meta,
			Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template}}, metav1.CreateOptions{})
	default:
		t.Fatalf("createReader: kind %s", kind)
	}
	if err != nil {
		t.Fatalf("creating %s %s/%s: %v", kind, ns, name, err)
	}
}

// leaseHolder returns the holder of a Lease in the manifests' namespace.
func leaseHolder(t *testing.T, name string) string {
	lease, err := env.kube.CoordinationV1().Leases(manifestsNamespace).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// stopCleanly stops the controller with SIGTERM and expects status 0.
func stopCleanly(t *testing.T, p *controllerProcess) {
	t.Helper()
	p.Stop()
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("controller exit code after SIGTERM: %d\n%s", code, p.LogTail(30))
	}
}

// The shipped RBAC is sufficient: the controller, authenticated only as the
// ServiceAccount of manifests/ and leading through the Lease its Role allows,
// records and restarts a Deployment and a DaemonSet, and reports nothing
// degraded.
func TestRBACShippedRulesSuffice(t *testing.T) {
	objects := render(t, filepath.Join(env.repoRoot, "manifests"))
	applyServerSide(t, "rbac-shipped", kindsOf(objects, rbacKinds...))
	kubeconfig, _ := serviceAccountKubeconfig(t, manifestsNamespace, controllerSA)

	ns := newNamespace(t)
	optIn := "rbac.e2e.example/restart"
	createConfigMap(t, ns, "app", map[string]string{"k": "0"})
	createReader(t, "Deployment", ns, "web", optIn, "app")
	createReader(t, "DaemonSet", ns, "agent", optIn, "app")

	ctx := ctxFor(t)
	pod := "restart-controller-e2e-shipped"
	p, err := env.startControllerAs(ctx, controllerRun{
		name: "rbac-shipped", kubeconfig: kubeconfig, env: podEnv(pod),
		configFile: rbacConfig(t, "rbac-shipped", optIn, "rbac-e2e-shipped"),
		args:       []string{"--restart-grace-period", restartGraceRBAC},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	waitFor(t, "the controller to lead through the Lease its Role allows", func() (bool, error) {
		return leaseHolder(t, "rbac-e2e-shipped") == pod, nil
	})
	want := "configmap/" + ns + "/app"
	waitRecorded(t, deploymentsGVR, ns, "web", want)
	waitRecorded(t, daemonSetsGVR, ns, "agent", want)
	setConfigMapKey(t, ns, "app", "k", "1")
	waitDeploymentRestarts(t, ns, "web", 1)
	waitFor(t, "the daemonset restarted", func() (bool, error) {
		return getWorkload(t, daemonSetsGVR, ns, "agent").restartedAt != "", nil
	})

	if code, body := p.readyz(t); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("readyz = %d %q, want 200 \"ok\\n\" with nothing degraded", code, body)
	}
	if v, found := p.metricWith(t, "restart_controller_kind_degraded"); found {
		t.Fatalf("restart_controller_kind_degraded = %v with the shipped RBAC", v)
	}
	if v := p.failedReconciles(t); v != 0 {
		t.Fatalf("%v reconcile errors with the shipped RBAC:\n%s", v, p.LogTail(40))
	}
	if p.logContains("is forbidden") {
		t.Fatalf("the controller met a forbidden request:\n%s", p.LogTail(60))
	}
	stopCleanly(t, p)
}

// One kind missing from the ClusterRole (daemonsets, in a copy bound to a
// ServiceAccount of its own) degrades, never stalls: the controller becomes
// ready and leads, restarts the Deployment, and reports the DaemonSets as
// degraded in its log (naming the missing verbs), its metrics, /readyz and
// an Event on its Pod. Once the rule is added, the kind joins without a
// restart of the controller and every trace clears.
func TestRBACMissingKindDegradesWithoutStalling(t *testing.T) {
	objects := render(t, filepath.Join(env.repoRoot, "manifests"))
	applyServerSide(t, "rbac-degraded", kindsOf(objects, rbacKinds...))
	ctx := ctxFor(t)

	// The shipped ClusterRole, without daemonsets, for its own ServiceAccount.
	const sa = "restart-controller-degraded"
	var shipped rbacv1.ClusterRole
	for _, o := range kindsOf(objects, "ClusterRole") {
		if err := yaml.Unmarshal([]byte(o.yaml), &shipped); err != nil {
			t.Fatal(err)
		}
	}
	degraded := shipped.DeepCopy()
	degraded.ObjectMeta = metav1.ObjectMeta{Name: sa}
	removed := false
	for i, rule := range degraded.Rules {
		if j := slices.Index(rule.Resources, "daemonsets"); j >= 0 {
			degraded.Rules[i].Resources = slices.Delete(slices.Clone(rule.Resources), j, j+1)
			removed = true
		}
	}
	if !removed {
		t.Fatal("the shipped ClusterRole has no rule for daemonsets")
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: manifestsNamespace}}
	if _, err := env.kube.CoreV1().ServiceAccounts(manifestsNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.RbacV1().ClusterRoles().Create(ctx, degraded, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.RbacV1().RoleBindings(manifestsNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa + "-own-namespace"}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "restart-controller-own-namespace"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = env.kube.RbacV1().ClusterRoleBindings().Delete(bg, sa, metav1.DeleteOptions{})
		_ = env.kube.RbacV1().ClusterRoles().Delete(bg, sa, metav1.DeleteOptions{})
	})
	kubeconfig, _ := serviceAccountKubeconfig(t, manifestsNamespace, sa)

	ns := newNamespace(t)
	optIn := "degraded.e2e.example/restart"
	createConfigMap(t, ns, "app", map[string]string{"k": "0"})
	createReader(t, "Deployment", ns, "web", optIn, "app")
	createReader(t, "DaemonSet", ns, "agent", optIn, "app")

	pod := "restart-controller-e2e-degraded"
	started := time.Now()
	p, err := env.startControllerAs(ctx, controllerRun{
		name: "rbac-degraded", kubeconfig: kubeconfig, env: podEnv(pod),
		configFile: rbacConfig(t, "rbac-degraded", optIn, "rbac-e2e-degraded"),
		args:       []string{"--restart-grace-period", restartGraceRBAC},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	t.Logf("ready %s after start with daemonsets forbidden", time.Since(started).Round(10*time.Millisecond))

	// Reported at once, everywhere an operator looks.
	code, body := p.readyz(t)
	if code != http.StatusOK || !strings.Contains(body, "degraded: 1") || !strings.Contains(body, "daemonsets") ||
		!strings.Contains(body, "forbidden") {
		t.Fatalf("readyz = %d %q, want 200 naming daemonsets as degraded", code, body)
	}
	t.Logf("readyz while degraded:\n%s", body)
	if v, _ := p.metricWith(t, "restart_controller_kind_degraded", daemonSetsResource, `reason="forbidden"`); v != 1 {
		t.Fatalf("restart_controller_kind_degraded{daemonsets, forbidden} = %v, want 1", v)
	}
	if v, found := p.metricWith(t, "restart_controller_kind_degraded"); v != 1 || !found {
		t.Fatalf("restart_controller_kind_degraded sums to %v, want 1: only daemonsets", v)
	}
	if v, _ := p.metricWith(t, "restart_controller_workload_kind_watched", daemonSetsResource); v != 0 {
		t.Fatalf("restart_controller_workload_kind_watched{daemonsets} = %v, want 0", v)
	}
	for _, want := range []string{"kind degraded", "apps/v1, Resource=daemonsets", `missing_verbs="list,watch,patch"`} {
		if !p.logContains(want) {
			t.Fatalf("the log does not say %q:\n%s", want, p.LogTail(40))
		}
	}
	waitFor(t, "a KindDegraded Event on the controller's Pod", func() (bool, error) {
		return podEvent(t, pod, "KindDegraded", "daemonsets"), nil
	})

	// Nothing stalls: it leads, and the Deployment is recorded and restarted.
	waitFor(t, "the degraded replica to lead", func() (bool, error) {
		return leaseHolder(t, "rbac-e2e-degraded") == pod, nil
	})
	want := "configmap/" + ns + "/app"
	waitRecorded(t, deploymentsGVR, ns, "web", want)
	setConfigMapKey(t, ns, "app", "k", "1")
	waitDeploymentRestarts(t, ns, "web", 1)
	if _, ok := getWorkload(t, daemonSetsGVR, ns, "agent").annotations[appliedKey]; ok {
		t.Fatal("the forbidden kind's DaemonSet was recorded")
	}

	// The rule is added: the kind joins, and every trace clears.
	fixed := degraded.DeepCopy()
	fixed.Rules = shipped.Rules
	if _, err := env.kube.RbacV1().ClusterRoles().Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fixedAt := time.Now()
	waitRecorded(t, daemonSetsGVR, ns, "agent", want)
	waitFor(t, "the degraded mark to clear", func() (bool, error) {
		if _, found := p.metricWith(t, "restart_controller_kind_degraded"); found {
			return false, fmt.Errorf("restart_controller_kind_degraded still exposed")
		}
		if code, body := p.readyz(t); code != http.StatusOK || body != "ok\n" {
			return false, fmt.Errorf("readyz %d %q", code, body)
		}
		v, _ := p.metricWith(t, "restart_controller_workload_kind_watched", daemonSetsResource)
		return v == 1, nil
	})
	t.Logf("daemonsets joined %s after the rule was added", time.Since(fixedAt).Round(10*time.Millisecond))
	waitFor(t, "a KindRecovered Event on the controller's Pod", func() (bool, error) {
		return podEvent(t, pod, "KindRecovered", "daemonsets"), nil
	})
	if !p.logContains("kind recovered") {
		t.Fatalf("no recovery in the log:\n%s", p.LogTail(40))
	}
	stopCleanly(t, p)
}

// podEvent reports whether an Event with the reason, whose note contains
// the text, regards the Pod of that name in the manifests' namespace.
func podEvent(t *testing.T, pod, reason, text string) bool {
	list, err := env.kube.EventsV1().Events(manifestsNamespace).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Pod" && e.Regarding.Name == pod && e.Reason == reason && strings.Contains(e.Note, text) {
			return true
		}
	}
	return false
}

// The namespaced install (the base with the manifests/overlays/namespaced
// component) grants nothing cluster-wide, and is enough in each namespace its
// config lists: both restart, a namespace outside the list is not touched.
// A namespace whose RoleBinding is missing degrades alone.
func TestNamespacedInstall(t *testing.T) {
	// kustomize refuses an overlay inside the folder it includes, so the
	// component is used as an operator would: from a kustomization outside.
	dir := filepath.Join(env.workDir, "namespaced-install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, filepath.Join(env.repoRoot, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%s]
components: [%s/overlays/namespaced]
`, base, base)), 0o644); err != nil {
		t.Fatal(err)
	}
	objects := render(t, dir)
	watched := []string{"team-a", "team-b"}
	if n := len(kindsOf(objects, "ClusterRole", "ClusterRoleBinding")); n != 0 {
		t.Fatalf("the namespaced install renders %d cluster-wide RBAC objects", n)
	}
	for _, ns := range watched {
		if !slices.ContainsFunc(objects, func(o renderedObject) bool { return o.Kind == "RoleBinding" && o.Metadata.Namespace == ns }) {
			t.Fatalf("no RoleBinding in %s", ns)
		}
	}
	configs := kindsOf(objects, "ConfigMap")
	if len(configs) != 1 {
		t.Fatalf("%d ConfigMaps rendered, want the config", len(configs))
	}
	var rendered corev1.ConfigMap
	if err := yaml.Unmarshal([]byte(configs[0].yaml), &rendered); err != nil {
		t.Fatal(err)
	}
	var file struct {
		Namespaces []string `json:"namespaces"`
	}
	if err := yaml.Unmarshal([]byte(rendered.Data["config.yaml"]), &file); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(file.Namespaces, watched) {
		t.Fatalf("the config lists namespaces %v, its RoleBindings are in %v", file.Namespaces, watched)
	}
	optIn := "namespaced.e2e.example/restart"
	var cfg map[string]interface{}
	if err := yaml.Unmarshal([]byte(rendered.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["annotations"] = map[string]interface{}{"optIn": optIn}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(env.workDir, "namespaced-config.yaml")
	if err := os.WriteFile(configFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx := ctxFor(t)
	for _, ns := range watched {
		waitNamespaceNotTerminating(t, ns)
		if _, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		waitFor(t, "default service account in "+ns, func() (bool, error) {
			_, err := env.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	}
	applyServerSide(t, "namespaced", kindsOf(objects, rbacKinds...))
	kubeconfig, rc := serviceAccountKubeconfig(t, manifestsNamespace, controllerSA)
	asController, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asController.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
		t.Fatalf("the namespaced ServiceAccount lists ConfigMaps cluster-wide (err %v): a ClusterRoleBinding is left over", err)
	}

	outside := newNamespace(t)
	for _, ns := range append(slices.Clone(watched), outside) {
		createConfigMap(t, ns, "app", map[string]string{"k": "0"})
		createReader(t, "Deployment", ns, "web", optIn, "app")
	}
	run := func(name string) *controllerProcess {
		p, err := env.startControllerAs(ctx, controllerRun{
			name: name, kubeconfig: kubeconfig, configFile: configFile, env: podEnv("restart-controller-e2e-" + name),
			args: []string{"--restart-grace-period", restartGraceRBAC},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := run("namespaced")
	if code, body := p.readyz(t); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("readyz = %d %q, want 200 \"ok\\n\"", code, body)
	}
	for _, ns := range watched {
		waitRecorded(t, deploymentsGVR, ns, "web", "configmap/"+ns+"/app")
		setConfigMapKey(t, ns, "app", "k", "1")
	}
	for _, ns := range watched {
		waitDeploymentRestarts(t, ns, "web", 1)
	}
	// Had it watched the outside namespace too, its Deployment would have
	// been recorded at start-up, with the watched ones, before any of them
	// restarted a grace period later.
	if _, ok := getWorkload(t, deploymentsGVR, outside, "web").annotations[appliedKey]; ok {
		t.Fatalf("a Deployment in %s, outside the config's namespaces, was recorded", outside)
	}
	if v := p.failedReconciles(t); v != 0 {
		t.Fatalf("%v reconcile errors with the namespaced RBAC:\n%s", v, p.LogTail(40))
	}
	stopCleanly(t, p)

	// team-b loses its RoleBinding: it degrades, team-a keeps working.
	if err := env.kube.RbacV1().RoleBindings("team-b").Delete(ctx, "restart-controller", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p = run("namespaced-degraded")
	defer p.Stop()
	code, body := p.readyz(t)
	if code != http.StatusOK || !strings.Contains(body, "namespace team-b") || strings.Contains(body, "namespace team-a") {
		t.Fatalf("readyz = %d %q, want 200 naming team-b only", code, body)
	}
	for _, resource := range []string{`resource="/v1, Resource=configmaps"`, `resource="/v1, Resource=secrets"`,
		`resource="apps/v1, Resource=deployments"`, daemonSetsResource} {
		if v, _ := p.metricWith(t, "restart_controller_kind_degraded", resource, `namespace="team-b"`, `reason="forbidden"`); v != 1 {
			t.Fatalf("restart_controller_kind_degraded{%s, team-b, forbidden} = %v, want 1", resource, v)
		}
	}
	if _, found := p.metricWith(t, "restart_controller_kind_degraded", `namespace="team-a"`); found {
		t.Fatal("team-a is reported degraded")
	}
	setConfigMapKey(t, "team-a", "app", "k", "2")
	waitDeploymentRestarts(t, "team-a", "web", 2)
	stopCleanly(t, p)
}

// A misspelled resource of a built-in group is a configuration error found
// against the cluster: exit status 2 and the config places, not a kind
// waited for forever.
func TestRBACUnknownBuiltinResourceExitsTwo(t *testing.T) {
	configFile := writeConfig(t, "misspelled", func(cfg map[string]interface{}) {
		workloads := cfg["workloads"].([]interface{})
		workloads[1].(map[string]interface{})["resource"] = "statefulsetz"
	})
	cmd := exec.CommandContext(ctxFor(t), env.binary, "--kubeconfig", env.cluster.Kubeconfig, "--config", configFile,
		"--metrics-address", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2\n%s", err, out)
	}
	for _, want := range []string{"invalid configuration (checked against the cluster)", "workloads[1]", `"statefulsetz"`, "apps/v1 serves:"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("output does not say %q:\n%s", want, out)
		}
	}
}
