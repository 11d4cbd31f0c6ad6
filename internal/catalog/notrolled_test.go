package catalog

import (
	"testing"

	"github.com/restart-controller/restart-controller/internal/config"
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
