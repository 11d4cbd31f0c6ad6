package check

import (
	"bytes"
	"flag"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/restart-controller/restart-controller/internal/access"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain/explaintest"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func parse(t *testing.T, file string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNeeds(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{
			name: "defaults: every namespace, no lease",
			file: "",
			want: []string{
				"configmaps list,watch @all", "secrets list,watch @all",
				"deployments.apps list,watch,patch @all", "statefulsets.apps list,watch,patch @all",
				"daemonsets.apps list,watch,patch @all", "rollouts.argoproj.io list,watch,patch @all",
				"cronjobs.batch list,watch,patch @all", "cronjobs.batch get @all", "jobs.batch create,get @all",
				"events.events.k8s.io create,patch @all", "secrets get,create @default",
			},
		},
		{
			// Deleting is needed only where a kind is configured to be
			// recreated; Jobs are created only for runNow.
			name: "recreate, opted in for Jobs",
			file: `
sources: [{name: configmap, version: v1, resource: configmaps, dataFields: [data]}]
workloads:
- {group: batch, version: v1, resource: jobs, podTemplatePath: spec.template, restart: {strategy: recreate, clearFields: [spec.selector]}}
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
references: [{source: configmap, from: ["volumes[*].configMap"], name: name}]
`,
			want: []string{
				"configmaps list,watch @all",
				"jobs.batch list,watch,patch @all", "jobs.batch get @all", "jobs.batch delete,create @all",
				"deployments.apps list,watch,patch @all",
				"events.events.k8s.io create,patch @all", "secrets get,create @default",
			},
		},
		{
			// The CSI driver's status objects: read (list, watch) like
			// any source kind.
			name: "a source kind of lifecycle updatesOnly",
			file: csiFile(t),
			want: []string{
				"configmaps list,watch @all", "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io list,watch @all",
				"deployments.apps list,watch,patch @all",
				"events.events.k8s.io create,patch @all", "secrets get,create @default",
			},
		},
		{
			name: "namespaces and leader election",
			file: `
namespaces: [a, b]
leaderElection: {enabled: true, namespace: ops}
sources: [{name: configmap, version: v1, resource: configmaps, dataFields: [data]}]
workloads: [{group: batch, version: v1, resource: cronjobs, podTemplatePath: spec.jobTemplate.spec.template}]
references: [{source: configmap, from: ["volumes[*].configMap"], name: name}]
`,
			want: []string{
				"configmaps list,watch @a", "cronjobs.batch list,watch,patch @a", "events.events.k8s.io create,patch @a",
				"configmaps list,watch @b", "cronjobs.batch list,watch,patch @b", "events.events.k8s.io create,patch @b",
				"secrets get,create @ops", "leases.coordination.k8s.io get,create,update @ops",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, n := range access.Needs(parse(t, tt.file)) {
				ns := n.Namespace
				if ns == "" {
					ns = "all"
				}
				got = append(got, fmt.Sprintf("%s %s @%s", n.Resource, strings.Join(n.Verbs, ","), ns))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// csiFile configures the CSI source kind as examples/config.yaml shows it.
func csiFile(t testing.TB) string {
	source, reference := testfixture.CSIKind(t)
	return "sources:\n- {name: configmap, version: v1, resource: configmaps, dataFields: [data]}\n" + source +
		"workloads: [{group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}]\n" +
		"references:\n- {source: configmap, from: [\"volumes[*].configMap\"], name: name}\n" + reference
}

// A source kind of lifecycle updatesOnly that is not served is a warning,
// not an error: the controller starts, and watches it once its CRD is
// installed. Describe names how its objects make sources.
func TestServedCSI(t *testing.T) {
	cfg := parse(t, csiFile(t))
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true}}},
	}}}
	got := Served(disc, cfg)
	want := Result{LevelWarning, "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io (v1) served",
		"not served (CRD not installed?); the controller watches it once it appears; no group \"secrets-store.csi.x-k8s.io\" is served"}
	if len(got) != 3 || got[1] != want {
		t.Errorf("got %+v, want %+v second", got, want)
	}
	w := Describe(cfg)
	if len(w.Sources) != 2 || !strings.Contains(w.Sources[1], "members of the source named by status.secretProviderClassName, lifecycle updatesOnly") {
		t.Errorf("sources %q", w.Sources)
	}
}

func TestBuiltIn(t *testing.T) {
	for group, want := range map[string]bool{
		"": true, "apps": true, "batch": true, "app": true, "networking.k8s.io": true,
		"argoproj.io": false, "gateway.networking.k8s.io": false, "example.com": false,
	} {
		if got := builtIn(group); got != want {
			t.Errorf("builtIn(%q) = %v, want %v", group, got, want)
		}
	}
}

// Rendering of reports, on a config and results as the cluster checks
// return them.
func TestRenderGolden(t *testing.T) {
	cfg := parse(t, `
namespaces: [shop]
workloadSelector: "tier!=batch"
leaderElection: {enabled: true, namespace: ops}
`)
	tests := []struct {
		name   string
		report Report
		format string
	}{
		{"offline.txt", Report{Config: "config.yaml", Watches: Describe(cfg), Note: "not checked (--offline): only the config file was checked", Results: []Result{}}, ""},
		{"cluster.txt", Report{Config: "config.yaml", Watches: Describe(cfg), Cluster: "https://127.0.0.1:6443",
			Subject: "system:serviceaccount:ops:restart-controller", Results: []Result{
				{LevelOK, "configmaps (v1) served", "yes"},
				{LevelWarning, "rollouts.argoproj.io (v1alpha1) served", "not served (CRD not installed?); the controller watches it once it appears; no group \"argoproj.io\" is served"},
				{LevelOK, "permissions on configmaps", "list, watch (namespace shop; source kind configmap)"},
				{LevelError, "permissions on deployments.apps", "missing patch (namespace shop; workload kind); has list, watch"},
			}}, ""},
		{"cluster.json", Report{Config: "config.yaml", Watches: Describe(cfg), Cluster: "https://127.0.0.1:6443",
			Results: []Result{{LevelError, "cluster", "Unauthorized"}}}, "json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if tt.format == "" {
				render(&b, &tt.report)
			} else if err := writeReport(&b, &tt.report, tt.format); err != nil {
				t.Fatal(err)
			}
			explaintest.Compare(t, filepath.Join("testdata", tt.name), b.String(), *update)
		})
	}
}
