// Package testfixture holds the fixtures the tests of several packages
// share: the example configuration compiled, one of its workload kinds, and
// objects written as YAML. Only tests import it.
package testfixture

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
)

// Deployments is the resource of apps/v1 Deployments.
var Deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// ExamplePath is examples/config.yaml, found from this file so that a test
// of any package reads the same file.
func ExamplePath(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testfixture: cannot locate its own source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "config.yaml")
}

// ExampleConfig compiles examples/config.yaml.
func ExampleConfig(t testing.TB) *config.Config {
	t.Helper()
	data, err := os.ReadFile(ExamplePath(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("examples/config.yaml: %v", err)
	}
	return cfg
}

// WorkloadKind returns cfg's workload kind of gvr.
func WorkloadKind(t testing.TB, cfg *config.Config, gvr schema.GroupVersionResource) config.WorkloadKind {
	t.Helper()
	for _, w := range cfg.Workloads {
		if w.GVR == gvr {
			return w
		}
	}
	t.Fatalf("the config has no workload kind %s", gvr)
	return config.WorkloadKind{}
}

// FromYAML decodes an object the way the API machinery decodes JSON (int64
// numbers).
func FromYAML(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return u
}

// CSIKind returns the CSI source kind that examples/config.yaml shows in a
// comment, uncommented: source is its entry of sources[] and reference its
// entry of references[], each a YAML list item ending in a newline. Tests
// that configure the kind use these, so the documented example stays one
// that works.
func CSIKind(t testing.TB) (source, reference string) {
	t.Helper()
	source = commentedBlock(t, "#   - name: secretproviderclasspodstatus", "#     ")
	reference = commentedBlock(t, "#   - {source: secretproviderclasspodstatus,", "#     ")
	if source == "" || reference == "" {
		t.Fatal("examples/config.yaml no longer shows the CSI source kind and its reference in a comment")
	}
	return source, reference
}

// DeploymentConfigKind returns the OpenShift DeploymentConfig workload kind
// that examples/config.yaml shows in a comment, uncommented: its entry of
// workloads[], a YAML list item ending in a newline. Tests that configure
// the kind use it, so the documented example stays one that works.
func DeploymentConfigKind(t testing.TB) string {
	t.Helper()
	kind := commentedBlock(t, "#   - {group: apps.openshift.io, version: v1, resource: deploymentconfigs,", "#      ")
	if kind == "" {
		t.Fatal("examples/config.yaml no longer shows the DeploymentConfig kind in a comment")
	}
	return kind
}

// commentedBlock returns the lines of examples/config.yaml from one that
// begins with first, on while they begin with more, uncommented ("#   "
// cut off) and each ending in a newline; "" when no line begins with first.
func commentedBlock(t testing.TB, first, more string) string {
	t.Helper()
	data, err := os.ReadFile(ExamplePath(t))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, first):
			in = true
		case in && !strings.HasPrefix(line, more):
			in = false
		}
		if in {
			block += strings.TrimPrefix(line, "#   ") + "\n"
		}
	}
	return block
}
