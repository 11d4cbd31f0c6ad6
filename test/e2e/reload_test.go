package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A changed config file is put in force without restarting the process or
// any workload: a kind added by the reload is watched; a broken file is
// refused and the running config carries on.
func TestConfigHotReload(t *testing.T) {
	ns := newNamespace(t)
	keys := keysFor("reload")
	onlyDeployments := func(cfg map[string]interface{}) {
		cfg["workloads"] = []interface{}{map[string]interface{}{
			"group": "apps", "version": "v1", "resource": "deployments", "podTemplatePath": "spec.template"}}
	}
	configFile := isolatedConfig(t, "reload", ns, keys, onlyDeployments)
	p, err := env.startController(ctxFor(t), "reload", configFile, "--restart-grace-period", "500ms")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	pid := p.cmd.Process.Pid
	hashBefore := configHash(t, p)

	createConfigMap(t, ns, "app", map[string]string{"k": "1"})
	zero := int32(0)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: labelsFor(name), Annotations: map[string]string{keys.optIn: "enabled"}}
	}
	template := func(name string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)},
			Spec: podSpec(t, `volumes: [{name: v, configMap: {name: app}}]`)}
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(ctxFor(t), &appsv1.Deployment{ObjectMeta: meta("web"),
		Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labelsFor("web")}, Template: template("web")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.AppsV1().StatefulSets(ns).Create(ctxFor(t), &appsv1.StatefulSet{ObjectMeta: meta("db"),
		Spec: appsv1.StatefulSetSpec{Replicas: &zero, ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labelsFor("db")}, Template: template("db")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnnotated(t, ns, "deployments", "web", keys.applied)
	if annotated(t, ns, "statefulsets", "db", keys.applied) {
		t.Fatal("a kind the config does not name was handled")
	}

	// Add StatefulSets by rewriting the file in place, as a mounted ConfigMap changes.
	writeConfig(t, "reload", func(cfg map[string]interface{}) {
		cfg["namespaces"] = []interface{}{ns}
		cfg["annotations"] = map[string]interface{}{"optIn": keys.optIn, "appliedChecksums": keys.applied,
			"restartTimestamp": keys.timestamp, "appliedTemplateHash": keys.templateHash}
	})
	waitAnnotated(t, ns, "statefulsets", "db", keys.applied)
	if h := configHash(t, p); h == hashBefore {
		t.Fatalf("config hash metric unchanged (%s) after a reload", h)
	}

	// A broken file is refused; the config in force keeps working.
	if err := os.WriteFile(configFile, []byte("workers: many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken file refused", func() (bool, error) {
		v, err := p.Metric("restart_controller_config_last_reload_successful")
		return err == nil && v == 0, err
	})
	setConfigMapKey(t, ns, "app", "k", "2")
	waitAnnotated(t, ns, "deployments", "web", keys.timestamp, "spec", "template")
	waitAnnotated(t, ns, "statefulsets", "db", keys.timestamp, "spec", "template")

	if p.cmd.Process.Pid != pid || exited(p) {
		t.Fatal("the process restarted or exited")
	}
	// The reloads themselves restarted nothing: one change, one restart each.
	rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	revs, err := env.kube.AppsV1().ControllerRevisions(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 2 || len(revs.Items) != 2 {
		t.Fatalf("%d ReplicaSets and %d StatefulSet revisions, want 2 and 2 (created, then one restart each)", len(rss.Items), len(revs.Items))
	}
}

func configHash(t *testing.T, p *controllerProcess) string {
	t.Helper()
	var hash string
	waitFor(t, "the config hash metric", func() (bool, error) {
		h, err := metricLabel(p, "restart_controller_config_info", "hash")
		hash = h
		return err == nil && h != "", err
	})
	return hash
}

// annotated reports whether the object carries the annotation, on its
// metadata or at the given path (e.g. spec, template).
func annotated(t *testing.T, ns, resource, name, key string, path ...string) bool {
	t.Helper()
	u, err := env.dynamic.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: resource}).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, found, err := unstructuredString(u.Object, append(append(path, "metadata", "annotations"), key)...)
	return err == nil && found
}

func waitAnnotated(t *testing.T, ns, resource, name, key string, path ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s %s/%s annotated %s", resource, ns, name, key), func() (bool, error) {
		return annotated(t, ns, resource, name, key, path...), nil
	})
}

func exited(p *controllerProcess) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// metricLabel returns the value of label on the first sample of the metric.
func metricLabel(p *controllerProcess, name, label string) (string, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{[^}]*` + regexp.QuoteMeta(label) + `="([^"]*)"`)
	m := re.FindSubmatch(body)
	if m == nil {
		return "", fmt.Errorf("no %s{%s} sample", name, label)
	}
	return string(m[1]), nil
}
