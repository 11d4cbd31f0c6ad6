package catalog

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/rollout"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

// notRolledWhen conditions of the example configuration: a paused
// Deployment, OnDelete StatefulSets and DaemonSets.
func TestReduceWorkloadNotRolled(t *testing.T) {
	cfg := exampleConfig(t)
	kinds := map[string]config.WorkloadKind{}
	for _, k := range cfg.Workloads {
		kinds[k.GVR.Resource] = k
	}
	for _, tc := range []struct {
		name, resource, yaml, want string
	}{
		{"running deployment", "deployments", `{kind: Deployment, spec: {template: {spec: {}}}}`, ""},
		{"paused: false", "deployments", `{kind: Deployment, spec: {paused: false, template: {spec: {}}}}`, ""},
		{"paused deployment", "deployments", `{kind: Deployment, spec: {paused: true, template: {spec: {}}}}`, "spec.paused is true"},
		{"paused as a string is not paused", "deployments", `{kind: Deployment, spec: {paused: "true", template: {spec: {}}}}`, ""},
		{"rolling statefulset", "statefulsets", `{kind: StatefulSet, spec: {updateStrategy: {type: RollingUpdate}, template: {spec: {}}}}`, ""},
		{"OnDelete statefulset", "statefulsets", `{kind: StatefulSet, spec: {updateStrategy: {type: OnDelete}, template: {spec: {}}}}`, "spec.updateStrategy.type is OnDelete"},
		{"OnDelete daemonset", "daemonsets", `{kind: DaemonSet, spec: {updateStrategy: {type: OnDelete}, template: {spec: {}}}}`, "spec.updateStrategy.type is OnDelete"},
		{"updateStrategy of the wrong type", "daemonsets", `{kind: DaemonSet, spec: {updateStrategy: OnDelete, template: {spec: {}}}}`, ""},
		{"kind without conditions", "rollouts", `{kind: Rollout, spec: {paused: true, template: {spec: {}}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, tc.yaml)
			u.SetName("w")
			u.SetNamespace("shop")
			out, err := ReduceWorkload(kinds[tc.resource], cfg)(u)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.(*WorkloadState).NotRolled; got != tc.want {
				t.Errorf("NotRolled %q, want %q", got, tc.want)
			}
		})
	}
}

// The DeploymentConfig kind examples/config.yaml shows in a comment: one
// that is paused, or has no ConfigChange trigger, is not rolled by a
// template change; its rollout is read by the deploymentconfig rule.
func TestReduceDeploymentConfigNotRolled(t *testing.T) {
	base, err := os.ReadFile(testfixture.ExamplePath(t))
	if err != nil {
		t.Fatal(err)
	}
	tree := map[string]interface{}{}
	if err := yaml.Unmarshal(base, &tree); err != nil {
		t.Fatal(err)
	}
	var dc []interface{}
	if err := yaml.Unmarshal([]byte(testfixture.DeploymentConfigKind(t)), &dc); err != nil {
		t.Fatal(err)
	}
	tree["workloads"] = append(tree["workloads"].([]interface{}), dc...)
	file, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(file)
	if err != nil {
		t.Fatalf("the commented DeploymentConfig kind: %v", err)
	}
	kind := testfixture.WorkloadKind(t, cfg, schema.GroupVersionResource{Group: "apps.openshift.io", Version: "v1", Resource: "deploymentconfigs"})
	if kind.Rollout.Kind != rollout.KindDeploymentConfig {
		t.Errorf("rollout rule %s", kind.Rollout.Kind)
	}
	for _, tc := range []struct {
		name, yaml, want string
		phase            rollout.Phase
	}{
		{"a ConfigChange trigger", `{apiVersion: apps.openshift.io/v1, kind: DeploymentConfig, spec: {triggers: [{type: ImageChange}, {type: ConfigChange}], template: {spec: {}}}}`, "", rollout.Progressing},
		{"only an ImageChange trigger", `{apiVersion: apps.openshift.io/v1, kind: DeploymentConfig, spec: {triggers: [{type: ImageChange}], template: {spec: {}}}}`,
			"spec.triggers has no element whose type is ConfigChange", rollout.NotRolling},
		{"no trigger", `{apiVersion: apps.openshift.io/v1, kind: DeploymentConfig, spec: {triggers: [], template: {spec: {}}}}`, "spec.triggers has no element whose type is ConfigChange", rollout.NotRolling},
		{"paused", `{apiVersion: apps.openshift.io/v1, kind: DeploymentConfig, spec: {paused: true, triggers: [{type: ConfigChange}], template: {spec: {}}}}`, "spec.paused is true", rollout.NotRolling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, tc.yaml)
			u.SetName("w")
			u.SetNamespace("shop")
			out, err := ReduceWorkload(kind, cfg)(u)
			if err != nil {
				t.Fatal(err)
			}
			w := out.(*WorkloadState)
			if w.NotRolled != tc.want || w.Rollout.Phase != tc.phase {
				t.Errorf("NotRolled %q, rollout %s; want %q, %s", w.NotRolled, w.Rollout, tc.want, tc.phase)
			}
		})
	}
}
