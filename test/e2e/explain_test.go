package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/explain/explaintest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of explain and check")

// The explain tests run a controller of their own, with its own annotation
// keys and a grace period of an hour, on their own namespace: the suite's
// controller ignores these workloads, and a change stays waiting in its
// grace period for as long as the test looks at it.
const (
	explainOptIn    = "e2e.restart-controller/explain"
	explainApplied  = "e2e.restart-controller/applied"
	explainTemplate = "e2e.restart-controller/template"
)

// cliResult is one run of the binary as a command-line tool.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the operator CLI (kubectl-restart_controller) with args, with
// discovery's cache in a folder of the test's own and no config file in the
// environment.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCommand(t, env.plugin, nil, args...)
}

func runCommand(t *testing.T, binary string, extraEnv []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(ctxFor(t), binary, args...)
	cmd.Env = append(filteredEnviron("KUBECONFIG", "RESTART_CONTROLLER_CONFIG", "KUBECACHEDIR"),
		"KUBECACHEDIR="+filepath.Join(env.workDir, "kube-cache"))
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %s %s: %v", binary, strings.Join(args, " "), err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func filteredEnviron(drop ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			keep = keep && name != d
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	explaintest.Compare(t, filepath.Join("testdata", "explain", name), got, *updateGolden)
}

// explainFixture is the namespace of TestExplain with its own controller.
type explainFixture struct {
	ns, config string
}

func (f explainFixture) explain(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	r := runCLI(t, append([]string{"explain", "--kubeconfig", env.cluster.Kubeconfig, "--config", f.config, "-n", f.ns}, args...)...)
	if r.code != wantCode {
		t.Fatalf("explain %s: exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
	}
	return explaintest.Normalise(r.stdout, f.ns, "NS")
}

func explainObjectMeta(name string, optIn bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Labels: labelsFor(name)}
	if optIn {
		m.Annotations = map[string]string{explainOptIn: "enabled"}
	}
	return m
}

func createExplainDeployment(t *testing.T, ns, name string, optIn bool, spec corev1.PodSpec) {
	t.Helper()
	replicas := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: explainObjectMeta(name, optIn),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

// waitExplainRecorded waits until the test's controller recorded the
// workload's checksums, holding the given sources.
func waitExplainRecorded(t *testing.T, gvr schema.GroupVersionResource, ns, name string, sources ...string) map[string]string {
	t.Helper()
	var applied map[string]string
	waitFor(t, fmt.Sprintf("%s %s/%s recorded", gvr.Resource, ns, name), func() (bool, error) {
		raw, ok := getWorkload(t, gvr, ns, name).annotations[explainApplied]
		if !ok {
			return false, nil
		}
		applied = map[string]string{}
		if err := json.Unmarshal([]byte(raw), &applied); err != nil {
			return false, err
		}
		for _, s := range sources {
			if _, ok := applied[s]; !ok {
				return false, fmt.Errorf("%s missing from %s", s, raw)
			}
		}
		return true, nil
	})
	return applied
}

func TestExplain(t *testing.T) {
	ctx := ctxFor(t)
	ns := newNamespace(t)
	f := explainFixture{ns: ns, config: filepath.Join(t.TempDir(), "config.yaml")}
	// Every key left out keeps the default of examples/config.yaml. Without
	// ordering by resourceVersion, an update just before a workload appears
	// is recorded as "pending" (the "pending" golden needs one).
	cfg := fmt.Sprintf(`namespaces: [%s]
orderByResourceVersion: false
annotations:
  optIn: %s
  appliedChecksums: %s
  appliedTemplateHash: %s
  restartTimestamp: e2e.restart-controller/timestamp
`, ns, explainOptIn, explainApplied, explainTemplate)
	if err := os.WriteFile(f.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctrl, err := env.startController(ctx, "explain", f.config, "--restart-grace-period", "1h", "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrl.Stop)

	const password, token = "hunter2-e2e-password", "t0ken-e2e-value"
	createConfigMap(t, ns, "app-config", map[string]string{"color": "blue", "size": "L", "unused": "x"})
	createSecret(t, ns, "app-secret", map[string]string{"password": password, "token": token})
	createConfigMap(t, ns, "env-all", map[string]string{"A": "1", "B": "2"})
	createSecret(t, ns, "env-secret", map[string]string{"S": "env-secret-value"})
	createConfigMap(t, ns, "projected-cm", map[string]string{"p": "1"})
	createSecret(t, ns, "projected-secret", map[string]string{"q": "projected-secret-value"})
	createConfigMap(t, ns, "init-config", map[string]string{"mode": "fast"})

	// web reads through every reference form a pod template may hold (an
	// ephemeral container may not: the unit tests cover that form).
	createExplainDeployment(t, ns, "web", true, podSpec(t, `
volumes:
- name: config
  configMap: {name: app-config, items: [{key: size, path: size}]}
- name: creds
  secret: {secretName: app-secret, items: [{key: password, path: pw}]}
- name: bundle
  projected:
    sources:
    - configMap: {name: projected-cm}
    - secret: {name: projected-secret}
- name: flags
  configMap: {name: feature-flags, optional: true}
initContainers:
- name: init
  image: example/init:1
  envFrom: [{configMapRef: {name: init-config}}]
containers:
- name: app
  image: example/app:1
  envFrom:
  - configMapRef: {name: env-all}
  - secretRef: {name: env-secret}
  env:
  - name: COLOR
    valueFrom: {configMapKeyRef: {name: app-config, key: color}}
  - name: TOKEN
    valueFrom: {secretKeyRef: {name: app-secret, key: token}}
`))
	createExplainDeployment(t, ns, "worker", true, podSpec(t, `
containers:
- name: worker
  image: example/worker:1
  envFrom: [{configMapRef: {name: app-config}}]
`))
	createExplainDeployment(t, ns, "legacy", false, podSpec(t, `
containers:
- name: app
  image: example/app:1
  env: [{name: COLOR, valueFrom: {configMapKeyRef: {name: app-config, key: color}}}]
`))
	replicas := int32(1)
	sts := &appsv1.StatefulSet{
		ObjectMeta: explainObjectMeta("db", true),
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("db")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labelsFor("db")},
				Spec:       podSpec(t, `volumes: [{name: config, configMap: {name: app-config, optional: true, items: [{key: size, path: size}]}}]`),
			},
		},
	}
	if _, err := env.kube.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExplainRecorded(t, deploymentsGVR, ns, "web", "configmap/"+ns+"/app-config", "secret/"+ns+"/projected-secret")
	waitExplainRecorded(t, deploymentsGVR, ns, "worker", "configmap/"+ns+"/app-config")
	waitExplainRecorded(t, statefulSetsGVR, ns, "db", "configmap/"+ns+"/app-config")

	recorded := f.explain(t, 0, "deploy/web")
	t.Run("workload recorded, every reference form", func(t *testing.T) {
		golden(t, "workload-recorded.txt", recorded)
	})

	t.Run("kubectl's names for a kind all name the same workload", func(t *testing.T) {
		for _, args := range [][]string{{"deployment/web"}, {"deployments.apps/web"}, {"deployments.v1.apps/web"}, {"deploy", "web"}} {
			if got := f.explain(t, 0, args...); got != recorded {
				t.Errorf("explain %v differs from explain deploy/web:\n%s", args, got)
			}
		}
		if got := f.explain(t, 0, "sts/db"); !strings.Contains(got, "Workload:   statefulset.apps/db") {
			t.Errorf("explain sts/db:\n%s", got)
		}
	})

	t.Run("as a kubectl plugin", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(env.plugin, filepath.Join(dir, "kubectl-restart_controller")); err != nil {
			t.Fatal(err)
		}
		kubectl := filepath.Join(env.cluster.BinDir, "kubectl")
		r := runCommand(t, kubectl, []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")},
			"restart-controller", "explain", "deploy/web",
			"--kubeconfig", env.cluster.Kubeconfig, "--config", f.config, "-n", ns)
		if r.code != 0 {
			t.Fatalf("kubectl restart-controller explain: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if got := explaintest.Normalise(r.stdout, ns, "NS"); got != recorded {
			t.Errorf("kubectl restart-controller explain deploy/web differs:\n%s", got)
		}
		r = runCommand(t, kubectl, []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}, "restart-controller")
		if r.code != 2 || !strings.Contains(r.stderr, "kubectl restart-controller explain KIND/NAME") {
			t.Errorf("kubectl restart-controller without a subcommand: exit %d\n%s", r.code, r.stderr)
		}
		// The controller binary no longer explains: it points at the plugin.
		r = runCommand(t, env.binary, nil, "explain", "deploy/web", "--kubeconfig", env.cluster.Kubeconfig, "-n", ns)
		if r.code != 2 || !strings.Contains(r.stderr, "kubectl restart-controller explain") || r.stdout != "" {
			t.Errorf("restart-controller explain: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("a source's readers by key", func(t *testing.T) {
		golden(t, "configmap-readers.txt", f.explain(t, 0, "cm/app-config"))
		golden(t, "configmap-key-color.txt", f.explain(t, 0, "configmap", "app-config", "--key", "color"))
		golden(t, "configmap-key-unused.txt", f.explain(t, 0, "cm/app-config", "--key", "unused"))
		golden(t, "configmap-absent-optional.txt", f.explain(t, 0, "cm/feature-flags"))
	})

	t.Run("a Secret's values are never shown", func(t *testing.T) {
		var outs []string
		for _, format := range []string{"", "json", "yaml"} {
			args := []string{"secret/app-secret"}
			if format != "" {
				args = append(args, "-o", format)
			}
			outs = append(outs, f.explain(t, 0, args...))
			outs = append(outs, f.explain(t, 0, append([]string{"deploy/web"}, args[1:]...)...))
		}
		golden(t, "secret-readers.txt", outs[0])
		for _, out := range outs {
			for _, v := range []string{password, token, base64.StdEncoding.EncodeToString([]byte(password)), base64.StdEncoding.EncodeToString([]byte(token))} {
				if strings.Contains(out, v) {
					t.Errorf("output holds a secret value %q:\n%s", v, out)
				}
			}
		}
	})

	t.Run("a change of a key it does not read", func(t *testing.T) {
		setConfigMapKey(t, ns, "app-config", "unused", "changed")
		if got := f.explain(t, 0, "deploy/web"); got != recorded {
			t.Errorf("web reads no unused key, yet explain changed:\n%s", got)
		}
	})

	t.Run("a change of a key it reads waits in its grace period", func(t *testing.T) {
		setConfigMapKey(t, ns, "app-config", "color", "red")
		golden(t, "workload-changed.txt", f.explain(t, 0, "deploy/web"))
		var report struct {
			Decision struct {
				Action  string   `json:"action"`
				Changed []string `json:"changed"`
			} `json:"decision"`
		}
		if err := yaml.Unmarshal([]byte(f.explain(t, 0, "deploy/web", "-o", "yaml")), &report); err != nil {
			t.Fatal(err)
		}
		if report.Decision.Action != "restart" || len(report.Decision.Changed) != 1 || report.Decision.Changed[0] != "configmap/NS/app-config" {
			t.Errorf("-o yaml decision: %+v", report.Decision)
		}
		// The controller itself agrees: nothing restarted (its grace period is an hour).
		if w := getWorkload(t, deploymentsGVR, ns, "web"); w.replicaSets != 1 {
			t.Errorf("web restarted: %d replicasets", w.replicaSets)
		}
	})

	t.Run("recorded pending", func(t *testing.T) {
		changes := func() float64 {
			v, err := ctrl.Metric("deployment_restart_controller_changes_processed_total")
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		before := changes()
		createConfigMap(t, ns, "fresh", map[string]string{"v": "1"})
		setConfigMapKey(t, ns, "fresh", "v", "2")
		// The controller must have seen the update before it sees the workload.
		waitFor(t, "the controller observed fresh's creation and update", func() (bool, error) {
			return changes() >= before+2, nil
		})
		createExplainDeployment(t, ns, "late", true, podSpec(t, `
containers:
- name: app
  image: example/app:1
  envFrom: [{configMapRef: {name: fresh}}]
`))
		applied := waitExplainRecorded(t, deploymentsGVR, ns, "late", "configmap/"+ns+"/fresh")
		if applied["configmap/"+ns+"/fresh"] != "pending" {
			t.Fatalf("late recorded %v, want pending", applied)
		}
		golden(t, "workload-pending.txt", f.explain(t, 0, "deploy/late"))
	})

	t.Run("not opted in, not found, not a configured kind", func(t *testing.T) {
		golden(t, "workload-not-opted-in.txt", f.explain(t, 0, "deploy/legacy"))
		r := runCLI(t, "explain", "--kubeconfig", env.cluster.Kubeconfig, "--config", f.config, "-n", ns, "deploy/nothing")
		if r.code != 1 || !strings.Contains(r.stderr, `deployments.apps "nothing" not found`) {
			t.Errorf("missing workload: exit %d, stderr %s", r.code, r.stderr)
		}
		r = runCLI(t, "explain", "--kubeconfig", env.cluster.Kubeconfig, "--config", f.config, "-n", ns, "pod/x")
		if r.code != 2 || !strings.Contains(r.stderr, "pods is neither a source nor a workload kind of the config") {
			t.Errorf("pod: exit %d, stderr %s", r.code, r.stderr)
		}
	})
}

// rbacForNamespace returns manifests/rbac.yaml with its namespace replaced
// by ns and its cluster-wide names made unique, so that the test's RBAC is
// the manifests' and touches no other test.
func rbacForNamespace(t *testing.T, ns string) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.repoRoot, "manifests", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		cr  rbacv1.ClusterRole
		crb rbacv1.ClusterRoleBinding
		r   rbacv1.Role
		rb  rbacv1.RoleBinding
	)
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		var target interface{}
		switch meta.Kind {
		case "ClusterRole":
			target = &cr
		case "ClusterRoleBinding":
			target = &crb
		case "Role":
			target = &r
		case "RoleBinding":
			target = &rb
		default:
			t.Fatalf("unexpected %s in manifests/rbac.yaml", meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatal(err)
		}
	}
	cr.Name += "-" + ns
	crb.Name += "-" + ns
	crb.RoleRef.Name = cr.Name
	r.Namespace, rb.Namespace = ns, ns
	for _, subjects := range [][]rbacv1.Subject{crb.Subjects, rb.Subjects} {
		for i := range subjects {
			subjects[i].Namespace = ns
		}
	}
	return &cr, &crb, &r, &rb
}

func TestCheck(t *testing.T) {
	ctx := ctxFor(t)
	examples := filepath.Join(env.repoRoot, "examples", "config.yaml")
	manifestsConfig := filepath.Join(env.repoRoot, "manifests", "config.yaml")

	t.Run("offline", func(t *testing.T) {
		r := runCLI(t, "check", "--offline", "--config", examples)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		golden(t, "check-offline.txt", strings.ReplaceAll(r.stdout, env.repoRoot, "REPO"))
		m := runCLI(t, "check", "--offline", "--config", manifestsConfig)
		if m.code != 0 || strings.ReplaceAll(m.stdout, manifestsConfig, examples) != r.stdout {
			t.Errorf("manifests/config.yaml: exit %d\n%s\n%s", m.code, m.stdout, m.stderr)
		}
	})

	t.Run("invalid configs fail as the controller does", func(t *testing.T) {
		dir := t.TempDir()
		notYAML := filepath.Join(dir, "not-yaml.yaml")
		if err := os.WriteFile(notYAML, []byte("workloads: [\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{filepath.Join(env.repoRoot, "cmd", "restart-controller", "testdata", "bad.yaml"), notYAML, filepath.Join(dir, "missing.yaml")} {
			r := runCLI(t, "check", "--offline", "--config", file)
			controller := runCommand(t, env.binary, nil, "--config", file)
			if r.code != 2 || controller.code != 2 || r.stderr != controller.stderr || r.stdout != "" {
				t.Errorf("%s: check exit %d, controller exit %d\ncheck:\n%s\ncontroller:\n%s", file, r.code, controller.code, r.stderr, controller.stderr)
			}
		}
		r := runCLI(t, "check", "--offline", "--config", examples, "--workers", "0")
		if r.code != 2 || !strings.Contains(r.stderr, "workers (flag --workers): must be between 1 and 1000, got 0") {
			t.Errorf("--workers 0: exit %d\n%s", r.code, r.stderr)
		}
	})

	t.Run("no cluster reachable", func(t *testing.T) {
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "check", "--config", examples, "--kubeconfig", kubeconfig)
		if r.code != 0 || !strings.Contains(r.stdout, "Cluster: not checked: https://127.0.0.1:1 is not reachable") ||
			!strings.Contains(r.stdout, "only the config file was checked") {
			t.Errorf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})

	ns := newNamespace(t)
	subject := ns + "/restart-controller"
	check := func(t *testing.T, wantCode int, configFile string, extra ...string) string {
		t.Helper()
		args := append([]string{"check", "--config", configFile, "--kubeconfig", env.cluster.Kubeconfig, "--as-service-account", subject, "--leader-election-namespace", ns}, extra...)
		r := runCLI(t, args...)
		if r.code != wantCode {
			t.Fatalf("check: exit %d, want %d\n%s\n%s", r.code, wantCode, r.stdout, r.stderr)
		}
		return r.stdout
	}
	hasLine := func(t *testing.T, out string, parts ...string) {
		t.Helper()
		for _, line := range strings.Split(out, "\n") {
			found := true
			for _, p := range parts {
				found = found && strings.Contains(line, p)
			}
			if found {
				return
			}
		}
		t.Errorf("no line with %q in:\n%s", parts, out)
	}

	t.Run("without RBAC every permission is missing", func(t *testing.T) {
		out := check(t, 1, examples)
		hasLine(t, out, "error", "permissions on configmaps", "missing list, watch (all namespaces")
		hasLine(t, out, "error", "permissions on deployments.apps", "missing list, watch, patch (all namespaces")
		hasLine(t, out, "ok", "deployments.apps (v1) served", "yes")
		hasLine(t, out, "Permissions checked for: system:serviceaccount:"+ns+":restart-controller")
	})

	cr, crb, role, rb := rbacForNamespace(t, ns)
	rbac := env.kube.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{}) })
	if _, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{}) })
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("with the manifests' RBAC", func(t *testing.T) {
		var out string
		// RBAC reaches the authorizer through its informers: a moment.
		waitFor(t, "RBAC in effect", func() (bool, error) {
			r := runCLI(t, "check", "--config", examples, "--kubeconfig", env.cluster.Kubeconfig, "--as-service-account", subject, "--leader-election-namespace", ns)
			out = r.stdout
			if r.code != 0 {
				return false, fmt.Errorf("exit %d:\n%s", r.code, r.stdout)
			}
			return true, nil
		})
		hasLine(t, out, "ok", "permissions on configmaps", "list, watch (all namespaces; source kind configmap)")
		hasLine(t, out, "ok", "permissions on secrets", "list, watch (all namespaces; source kind secret)")
		for _, kind := range []string{"deployments.apps", "statefulsets.apps", "daemonsets.apps", "rollouts.argoproj.io"} {
			hasLine(t, out, "ok", "permissions on "+kind, "list, watch, patch (all namespaces")
		}
		hasLine(t, out, "ok", "permissions on events.events.k8s.io", "create, patch")
		// The rollouts CRD is served when another test installed it.
		if !strings.Contains(out, "ok       rollouts.argoproj.io (v1alpha1) served") {
			hasLine(t, out, "warning", "rollouts.argoproj.io (v1alpha1) served", "not served (CRD not installed?)")
		}
		if strings.Contains(out, "leases") {
			t.Errorf("leases checked with leader election off:\n%s", out)
		}

		t.Logf("check --config examples/config.yaml:\n%s", out)

		// The manifests' config with the Deployment's own arguments, which
		// turn leader election on: the Lease is checked in its namespace,
		// with the manifests' Role.
		out = check(t, 0, manifestsConfig, "--leader-elect", "--leader-election-namespace", ns)
		hasLine(t, out, "leader election", "on, Lease "+ns+"/restart-controller")
		hasLine(t, out, "ok", "permissions on leases.coordination.k8s.io", "get, create, update (namespace "+ns+"; leader election)")
		out = check(t, 1, manifestsConfig, "--leader-elect", "--leader-election-namespace", "default")
		hasLine(t, out, "error", "permissions on leases.coordination.k8s.io", "missing get, create, update (namespace default; leader election)")
	})

	t.Run("a ClusterRole lacking a verb", func(t *testing.T) {
		lacking := cr.DeepCopy()
		for i, rule := range lacking.Rules {
			if len(rule.APIGroups) == 1 && rule.APIGroups[0] == "apps" {
				lacking.Rules[i].Verbs = []string{"list", "watch"}
			}
		}
		current, err := rbac.ClusterRoles().Get(ctx, cr.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lacking.ResourceVersion = current.ResourceVersion
		if _, err := rbac.ClusterRoles().Update(ctx, lacking, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var out string
		waitFor(t, "the missing verb seen", func() (bool, error) {
			r := runCLI(t, "check", "--config", examples, "--kubeconfig", env.cluster.Kubeconfig, "--as-service-account", subject, "--leader-election-namespace", ns)
			out = r.stdout
			if r.code != 1 {
				return false, fmt.Errorf("exit %d:\n%s", r.code, r.stdout)
			}
			return true, nil
		})
		for _, kind := range []string{"deployments.apps", "statefulsets.apps", "daemonsets.apps"} {
			hasLine(t, out, "error", "permissions on "+kind, "missing patch (all namespaces; workload kind); has list, watch")
		}
		hasLine(t, out, "ok", "permissions on rollouts.argoproj.io", "list, watch, patch")
		hasLine(t, out, "3 errors")
		t.Logf("check with a ClusterRole lacking patch on apps:\n%s", out)
	})

	t.Run("Reloader's annotations the config does not read", func(t *testing.T) {
		createAnnotatedDeployment(t, ns, "reloader-annotated", map[string]string{"reloader.stakater.com/auto": "true"},
			`containers: [{name: app, image: example/app:1}]`)
		nsConfig := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(nsConfig, []byte("namespaces: ["+ns+"]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := check(t, 1, nsConfig) // the ClusterRole still lacks patch: errors as above
		hasLine(t, out, "warning", "annotation reloader.stakater.com/auto", "on deployments/"+ns+"/reloader-annotated",
			"this config does not read it", "examples/presets/reloader.yaml")
		preset := filepath.Join(t.TempDir(), "reloader.yaml")
		raw, err := os.ReadFile(filepath.Join(env.repoRoot, "examples", "presets", "reloader.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(preset, append(raw, "\nnamespaces: ["+ns+"]\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := check(t, 1, preset); strings.Contains(out, "annotation reloader.stakater.com/auto") {
			t.Errorf("warned under the Reloader preset, which reads it:\n%s", out)
		}
	})
}
