package check

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
)

func preset(t *testing.T, name string) *config.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "presets", name))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A workload annotated Reloader's way, on its metadata and its pod template,
// under the default config: each annotation the config does not read is a
// warning naming the workloads and the preset; Reloader's own mark is not;
// under the Reloader preset nothing is, its pause period and rollout
// strategy included.
func TestPeerAnnotations(t *testing.T) {
	objs := []*unstructured.Unstructured{}
	for _, doc := range []string{`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, annotations: {reloader.stakater.com/auto: "true", team: a,
  deployment.reloader.stakater.com/pause-period: 5m, reloader.stakater.com/rollout-strategy: restart}}
spec: {template: {metadata: {annotations: {configmap.reloader.stakater.com/reload: app, reloader.stakater.com/last-reloaded-from: x}}, spec: {containers: []}}}`, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop, annotations: {reloader.stakater.com/auto: "true", com.xing.deployment-restart: enabled}}
spec: {template: {spec: {containers: []}}}`,
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	cfg := parse(t, "")
	kinds := []config.WorkloadKind{cfg.Workloads[0], cfg.Workloads[0]}
	got := PeerAnnotations(cfg, kinds, objs)
	want := []Result{
		{LevelWarning, "annotation configmap.reloader.stakater.com/reload",
			"on deployments/shop/web, but this config does not read it: it has no effect (examples/presets/reloader.yaml reads it)"},
		{LevelWarning, "annotation deployment.reloader.stakater.com/pause-period",
			"on deployments/shop/web, but this config does not read it: it has no effect (examples/presets/reloader.yaml reads it)"},
		{LevelWarning, "annotation reloader.stakater.com/auto",
			"on deployments/shop/api, deployments/shop/web, but this config does not read it: it has no effect (examples/presets/reloader.yaml reads it)"},
		{LevelWarning, "annotation reloader.stakater.com/rollout-strategy",
			"on deployments/shop/web, but this config does not read it: it has no effect (examples/presets/reloader.yaml reads it)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	reloader := preset(t, "reloader.yaml")
	if got := PeerAnnotations(reloader, []config.WorkloadKind{reloader.Workloads[0], reloader.Workloads[0]}, objs); len(got) != 0 {
		t.Errorf("under the Reloader preset: %q", got)
	}
}

// Peers is data kept equal to the presets: every annotation a preset reads
// on workloads or sources has a peer's domain whose preset is that file, and
// every peer's preset exists.
func TestPeersMatchPresets(t *testing.T) {
	for _, p := range Peers() {
		cfg := preset(t, p.Preset)
		keys := append([]string(nil), cfg.IgnoreAnnotations...)
		for _, o := range cfg.OptIns {
			keys = append(keys, o.Annotation)
			if o.SourceAnnotation != "" {
				keys = append(keys, o.SourceAnnotation)
			}
		}
		for _, l := range cfg.SourceLists {
			keys = append(keys, l.Annotation)
		}
		for _, e := range cfg.Excludes {
			keys = append(keys, e.Annotation)
		}
		if len(keys) == 0 {
			t.Errorf("%s reads no annotation of its own", p.Preset)
		}
		for _, k := range keys {
			if got, ok := peerOf(k); !ok || got.Preset != p.Preset {
				t.Errorf("%s reads %s, whose domain is not %s's (%+v)", p.Preset, k, p.Domain, got)
			}
		}
		if strings.Contains(p.Domain, "/") {
			t.Errorf("domain %q has a /", p.Domain)
		}
	}
}
