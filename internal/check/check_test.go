package check

import (
	"bytes"
	"errors"
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
	"github.com/restart-controller/restart-controller/internal/watch"
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

// check judges a configured kind as the controller does at start: an error
// exactly where watch.Resolve refuses (a *watch.ConfigError for a resource
// a served built-in group-version does not serve), a warning where the
// controller starts and waits for the kind. The API server's discovery
// answer is the input: a fake one gives it.
func TestServedAgreesWithTheController(t *testing.T) {
	served := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}, {Name: "secrets", Kind: "Secret"}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment"}, {Name: "deployments/scale", Kind: "Scale"}, {Name: "statefulsets", Kind: "StatefulSet"}}},
		{GroupVersion: "apiextensions.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "customresourcedefinitions", Kind: "CustomResourceDefinition"}}},
		{GroupVersion: "apiregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "apiservices", Kind: "APIService"}}},
		{GroupVersion: "argoproj.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "rollouts", Kind: "Rollout"}}},
	}
	const source = "- {name: configmap, version: v1, resource: configmaps, dataFields: [data]}\n"
	const reference = "references: [{source: configmap, from: [\"volumes[*].configMap\"], name: name}]\n"
	tests := []struct {
		name string
		// sources and workloads are added to the config's, whose
		// configmaps are served.
		sources, workloads string
		want               Result
		// configError is set where the controller exits 2: a
		// *watch.ConfigError; refused where it does not start otherwise.
		configError, refused bool
	}{
		{
			name:      "a resource a served built-in group-version does not serve",
			workloads: "- {group: apps, version: v1, resource: deploymnets, podTemplatePath: spec.template}\n",
			want: Result{LevelError, "deploymnets.apps (v1) served", "the controller does not start (a configuration error): " +
				`apps/v1, Resource=deploymnets is not served by the API server: apps is a built-in API group, so no CRD will add "deploymnets" to it ` +
				"(apps/v1 serves: deployments, statefulsets); check the group, version and resource"},
			configError: true,
		},
		{
			// kube-apiserver's extension server serves this group: no CRD
			// adds to it (check once warned here, while the controller
			// refused to start).
			name:      "a misspelled resource of apiextensions.k8s.io",
			workloads: "- {group: apiextensions.k8s.io, version: v1, resource: customresourcedefinitons, podTemplatePath: spec.template}\n",
			want: Result{LevelError, "customresourcedefinitons.apiextensions.k8s.io (v1) served", "the controller does not start (a configuration error): " +
				`apiextensions.k8s.io/v1, Resource=customresourcedefinitons is not served by the API server: apiextensions.k8s.io is a built-in API group, ` +
				`so no CRD will add "customresourcedefinitons" to it (apiextensions.k8s.io/v1 serves: customresourcedefinitions); check the group, version and resource`},
			configError: true,
		},
		{
			name:        "a misspelled resource of apiregistration.k8s.io",
			workloads:   "- {group: apiregistration.k8s.io, version: v1, resource: apiservice, podTemplatePath: spec.template}\n",
			want:        Result{Level: LevelError, Check: "apiservice.apiregistration.k8s.io (v1) served"},
			configError: true,
		},
		{
			name:        "a misspelled source kind of the core group",
			sources:     "- {name: secret, version: v1, resource: secretz, dataFields: [data]}\n",
			want:        Result{Level: LevelError, Check: "secretz (v1) served"},
			configError: true,
		},
		{
			// The controller starts and waits for the version (check once
			// called it an error).
			name:      "a version a built-in group does not serve",
			workloads: "- {group: apps, version: v2, resource: deployments, podTemplatePath: spec.template}\n",
			want: Result{LevelWarning, "deployments.apps (v2) served", "not served; kube-apiserver serves this group itself, no CRD can add it, " +
				`and the controller waits until it serves this version (a newer Kubernetes, --runtime-config): a typo? group "apps" is served in version(s) v1`},
		},
		{
			// No CRD may use a group without a dot, yet the controller
			// starts and waits (check once called it an error).
			name:      "a group without a dot that is not served",
			workloads: "- {group: app, version: v1, resource: deployments, podTemplatePath: spec.template}\n",
			want: Result{LevelWarning, "deployments.app (v1) served", "not served; no CRD can serve a group without a dot, " +
				`and the controller waits until an aggregated API serves it: a typo? no group "app" is served`},
		},
		{
			name:      "a resource a served CRD group-version does not serve",
			workloads: "- {group: argoproj.io, version: v1alpha1, resource: rolouts, podTemplatePath: spec.template}\n",
			want: Result{LevelWarning, "rolouts.argoproj.io (v1alpha1) served",
				"not served (CRD not installed?); the controller watches it once it appears; argoproj.io/v1alpha1 serves: rollouts"},
		},
		{
			name:      "a CRD group that is not served",
			workloads: "- {group: example.com, version: v1, resource: things, podTemplatePath: spec.template}\n",
			want: Result{LevelWarning, "things.example.com (v1) served",
				`not served (CRD not installed?); the controller watches it once it appears; no group "example.com" is served`},
		},
		{
			name:    "a source kind of a CRD group that is not served",
			sources: "- {name: thing, group: example.com, version: v1, resource: things, dataFields: [data]}\n",
			want: Result{LevelError, "things.example.com (v1) served",
				`not served, and the controller cannot start without its source kinds; no group "example.com" is served`},
			refused: true,
		},
		{
			name:      "a served kind",
			workloads: "- {group: apiextensions.k8s.io, version: v1, resource: customresourcedefinitions, podTemplatePath: spec.template}\n",
			want:      Result{LevelOK, "customresourcedefinitions.apiextensions.k8s.io (v1) served", "yes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			workloads := "- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}\n" + tt.workloads
			cfg := parse(t, "sources:\n"+source+tt.sources+"workloads:\n"+workloads+reference)
			disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: served}}
			got := Served(disc, cfg)
			if len(got) != 3 {
				t.Fatalf("got %+v, want 3 results", got)
			}
			// The kind under test is the second source or the second workload.
			under := got[2]
			if tt.sources != "" {
				under = got[1]
			}
			if tt.want.Detail == "" {
				under.Detail = ""
			}
			if under != tt.want {
				t.Errorf("got\n%+v\nwant\n%+v", under, tt.want)
			}

			_, err := watch.Resolve(cfg, disc)
			var configError *watch.ConfigError
			if got := errors.As(err, &configError); got != tt.configError {
				t.Errorf("watch.Resolve = %v: a *watch.ConfigError %v, want %v", err, got, tt.configError)
			}
			if refused := err != nil; refused != (tt.configError || tt.refused) {
				t.Errorf("watch.Resolve = %v: the controller refuses %v, want %v", err, refused, tt.configError || tt.refused)
			}
			if failed := (&Report{Results: got}).Failed(); failed != (err != nil) {
				t.Errorf("check failed %v, but watch.Resolve = %v", failed, err)
			}
		})
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
