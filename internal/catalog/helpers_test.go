package catalog

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
)

const examplePath = "../../examples/config.yaml"

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// exampleConfig compiles examples/config.yaml.
func exampleConfig(t testing.TB) *config.Config {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("examples/config.yaml: %v", err)
	}
	return cfg
}

// deploymentKind returns the configured workload kind of Deployments.
func deploymentKind(t testing.TB, cfg *config.Config) config.WorkloadKind {
	t.Helper()
	for _, w := range cfg.Workloads {
		if w.GVR == deployments {
			return w
		}
	}
	t.Fatal("example source has no deployments")
	return config.WorkloadKind{}
}

// fromYAML decodes a fixture the way the API machinery decodes JSON (int64 numbers).
func fromYAML(t testing.TB, s string) *unstructured.Unstructured {
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
