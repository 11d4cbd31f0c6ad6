package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/watch"
)

// fakeDiscoveryServer serves the discovery documents of core/v1 and apps/v1
// only, and fails the test on any other request: a configuration error must
// be found before anything is listed, watched or written.
func fakeDiscoveryServer(t *testing.T) *httptest.Server {
	docs := map[string]metav1.APIResourceList{
		"/api/v1": {GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true}, {Name: "secrets", Kind: "Secret", Namespaced: true}}},
		"/apis/apps/v1": {GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true}, {Name: "deployments/scale", Kind: "Scale", Namespaced: true},
			{Name: "statefulsets", Kind: "StatefulSet", Namespaced: true}, {Name: "daemonsets", Kind: "DaemonSet", Namespaced: true}}},
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A typo in a built-in group's resource is a configuration error found
// against the cluster: exit status 2, every place named, nothing watched.
func TestRunExitsTwoOnUnknownBuiltinResource(t *testing.T) {
	srv := fakeDiscoveryServer(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, srv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`
sources:
  - {name: configmap, group: "", version: v1, resource: configmapz, dataFields: [data]}
workloads:
  - {group: apps, version: v1, resource: deploymnets, podTemplatePath: spec.template}
  - {group: apps, version: v1, resource: statefulsets, podTemplatePath: spec.template}
references:
  - {source: configmap, from: ["volumes[*].configMap"], name: name}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--config", cfg, "--kubeconfig", kubeconfig, "--metrics-address", "127.0.0.1:0"},
		noEnv, &stdout, &stderr, func() {})
	if code != 2 {
		t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"invalid configuration (checked against the cluster)", "sources[0]", `"configmapz"`,
		"workloads[0]", `"deploymnets"`, "apps/v1 serves: daemonsets, deployments, statefulsets"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
		}
	}
}

func TestSelfReference(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	s := config.Settings{LeaderElect: true, LeaseNamespace: "restart-controller", LeaseName: "restart-controller"}
	pod := selfReference(s, env(map[string]string{"POD_NAME": "rc-0", "POD_NAMESPACE": "restart-controller", "POD_UID": "u-1"}))
	if pod == nil || pod.Kind != "Pod" || pod.Name != "rc-0" || pod.Namespace != "restart-controller" || pod.UID != "u-1" {
		t.Fatalf("with POD_NAME and POD_NAMESPACE: %+v, want the Pod", pod)
	}
	lease := selfReference(s, env(map[string]string{"POD_NAME": "rc-0"}))
	if lease == nil || lease.Kind != "Lease" || lease.APIVersion != "coordination.k8s.io/v1" || lease.Name != "restart-controller" {
		t.Fatalf("without POD_NAMESPACE, leader election on: %+v, want the Lease", lease)
	}
	s.LeaderElect = false
	if ref := selfReference(s, env(nil)); ref != nil {
		t.Fatalf("nothing to record on: %+v, want nil", ref)
	}
}

type eventCall struct {
	regarding               runtime.Object
	eventtype, reason, note string
}

type fakeRecorder struct{ calls []eventCall }

func (r *fakeRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...interface{}) {
	r.calls = append(r.calls, eventCall{regarding, eventtype, reason, fmt.Sprintf(note, args...)})
}

func TestHealthEvents(t *testing.T) {
	d := watch.Degradation{
		Target: watch.Target{Role: watch.RoleWorkload, Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}},
		Reason: watch.ReasonForbidden, MissingVerbs: []string{"list", "watch"}, Detail: strings.Repeat("x", 1000),
	}
	self := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "restart-controller", Name: "rc-0"}
	rec := &fakeRecorder{}
	notify := healthEvents(rec, self, hclog.NewNullLogger())
	notify(watch.HealthChange{Degradation: d})
	notify(watch.HealthChange{Degradation: d, Recovered: true})
	if len(rec.calls) != 2 {
		t.Fatalf("%d events, want 2", len(rec.calls))
	}
	warn, normal := rec.calls[0], rec.calls[1]
	if warn.regarding != self || warn.eventtype != corev1.EventTypeWarning || warn.reason != "KindDegraded" ||
		!strings.Contains(warn.note, "daemonsets") || !strings.Contains(warn.note, "list, watch") || len(warn.note) > 1024 {
		t.Fatalf("degraded event %+v", warn)
	}
	if normal.eventtype != corev1.EventTypeNormal || normal.reason != "KindRecovered" || !strings.Contains(normal.note, "daemonsets") {
		t.Fatalf("recovered event %+v", normal)
	}

	var logs bytes.Buffer
	nowhere := healthEvents(rec, nil, hclog.New(&hclog.LoggerOptions{Output: &logs}))
	nowhere(watch.HealthChange{Degradation: d})
	nowhere(watch.HealthChange{Degradation: d})
	if len(rec.calls) != 2 || strings.Count(logs.String(), "not recording Events") != 1 {
		t.Fatalf("without an object to record on: %d events, log %q; want none and one warning", len(rec.calls)-2, logs.String())
	}
}
