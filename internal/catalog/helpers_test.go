package catalog

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

const examplePath = "../../examples/config.yaml"

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// exampleConfig compiles examples/config.yaml.
func exampleConfig(t testing.TB) *config.Config { return testfixture.ExampleConfig(t) }

// deploymentKind returns the configured workload kind of Deployments.
func deploymentKind(t testing.TB, cfg *config.Config) config.WorkloadKind {
	return testfixture.WorkloadKind(t, cfg, deployments)
}

// fromYAML decodes a fixture the way the API machinery decodes JSON.
func fromYAML(t testing.TB, s string) *unstructured.Unstructured { return testfixture.FromYAML(t, s) }
