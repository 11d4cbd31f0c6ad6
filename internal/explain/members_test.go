package explain

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/members"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

// csiExplainConfig configures the CSI source kind as examples/config.yaml
// shows it.
func csiExplainConfig(t testing.TB) string {
	source, reference := testfixture.CSIKind(t)
	return "sources:\n- {name: configmap, version: v1, resource: configmaps, dataFields: [data]}\n" + source +
		"references:\n" + reference
}

const csiWorkload = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: 7a0e0000-0000-4000-8000-000000000001
  annotations: {com.xing.deployment-restart: enabled}
spec:
  template:
    spec:
      containers: [{name: app, image: app:1}]
      volumes: [{name: s, csi: {driver: secrets-store.csi.k8s.io, volumeAttributes: {secretProviderClass: vault}}}]
`

// TestExplainMembers: explain shows a source of lifecycle updatesOnly as
// the controller decides it: without members unknown (not absent, not
// unreadable), a baseline kept, an updated member's version a change.
func TestExplainMembers(t *testing.T) {
	cfg := defaultConfig(t, csiExplainConfig(t))
	kind := cfg.Workloads[0]
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(csiWorkload), &obj.Object); err != nil {
		t.Fatal(err)
	}
	spc, _ := cfg.sourceKind("secretproviderclasspodstatus")
	id := catalog.SourceID{Kind: spc.Name, Namespace: "shop", Name: "vault"}
	member := func(pod string, generation int64, version string) *members.State {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"status": map[string]interface{}{
			"secretProviderClassName": "vault", "objects": []interface{}{map[string]interface{}{"id": "secret/db", "version": version}},
		}}}
		u.SetName(pod + "-shop-vault")
		u.SetNamespace("shop")
		u.SetResourceVersion(fmt.Sprint(10 + generation))
		u.SetGeneration(generation)
		m, err := members.Reduce(spc.Members)(u)
		if err != nil {
			t.Fatal(err)
		}
		return m.(*members.State)
	}
	v1, _ := members.Group(id, []*members.State{member("a", 1, "v1")})
	recorded, _ := json.Marshal(map[string]string{id.String(): v1.Checksum(cfg.Sums, nil)})
	w := Workload{Kind: kind, Object: &obj}
	hash := reduceWorkload(t, cfg, w).TemplateHash
	obj.SetAnnotations(map[string]string{"com.xing.deployment-restart": "enabled",
		cfg.Annotations.AppliedChecksums: string(recorded), cfg.Annotations.AppliedTemplateHash: hash})

	tests := []struct {
		name    string
		members []*members.State
		status  string
		action  string
	}{
		{name: "no members", status: StatusNoMembers, action: ActionNothing},
		{name: "created members only, another version", members: []*members.State{member("a", 1, "v1"), member("b", 1, "v2")},
			status: StatusBaseline, action: ActionNothing},
		{name: "created members only, the recorded version", members: []*members.State{member("a", 1, "v1")},
			status: StatusUpToDate, action: ActionNothing},
		{name: "a member rotated", members: []*members.State{member("a", 2, "v2"), member("b", 1, "v1")},
			status: StatusChanged, action: ActionRestart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fetch := func(kind config.SourceKind, namespace, name string) (*catalog.SourceState, error) {
				s := catalog.SourceID{Kind: kind.Name, Namespace: namespace, Name: name}
				if state, ok := members.Group(s, tt.members); ok {
					return state, nil
				}
				return nil, fmt.Errorf("%s: %w", s, ErrNoMembers)
			}
			r := cfg.ExplainWorkload(kind, &obj, fetch, nil, now)
			if len(r.Sources) != 1 || r.Sources[0].Status != tt.status || r.Decision.Action != tt.action {
				t.Fatalf("sources %+v, decision %+v; want %s, %s", r.Sources, r.Decision, tt.status, tt.action)
			}
			// explain secretproviderclasspodstatus/vault: its reader, alike.
			state, _ := fetch(spc, "shop", "vault")
			sr := cfg.ExplainSource(spc, "shop", "vault", state, []Workload{w}, "")
			if len(sr.Readers) != 1 || sr.Readers[0].Status != tt.status {
				t.Errorf("readers %+v; want one %s", sr.Readers, tt.status)
			}
		})
	}
}
