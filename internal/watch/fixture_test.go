package watch

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

// The kinds of ../../examples/config.yaml.
var (
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	deployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	statefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	daemonSets   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	rollouts     = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
)

// listKinds lets the fake dynamic client list every kind a test may watch.
var listKinds = map[schema.GroupVersionResource]string{
	configMaps:   "ConfigMapList",
	secrets:      "SecretList",
	deployments:  "DeploymentList",
	statefulSets: "StatefulSetList",
	daemonSets:   "DaemonSetList",
	rollouts:     "RolloutList",
	settings:     "SettingList",
	{Group: "batch", Version: "v1", Resource: "cronjobs"}: "CronJobList",
	spcps: "SecretProviderClassPodStatusList",
}

// Discovery documents of the API server the tests pretend to talk to.
var (
	coreV1 = resourceList("v1", resource("configmaps", "ConfigMap"), resource("secrets", "Secret"))
	appsV1 = resourceList("apps/v1", resource("deployments", "Deployment"),
		resource("statefulsets", "StatefulSet"), resource("daemonsets", "DaemonSet"))
	batchV1      = resourceList("batch/v1", resource("cronjobs", "CronJob"), resource("jobs", "Job"))
	argoV1alpha1 = resourceList("argoproj.io/v1alpha1", resource("rollouts", "Rollout"))
)

func resource(name, kind string) metav1.APIResource {
	return metav1.APIResource{Name: name, Kind: kind, Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}
}

func resourceList(groupVersion string, resources ...metav1.APIResource) *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: groupVersion, APIResources: resources}
}

// fakeDiscovery answers from client-go's fake discovery, whose resources a
// test changes while Run reads them (a CRD being installed); the fake reads
// its Resources without a lock, hence this one. It can also fail lookups of
// a group-version, and counts them.
type fakeDiscovery struct {
	*discoveryfake.FakeDiscovery
	mu    sync.Mutex
	calls map[string]int
	fail  map[string][]error
}

func newFakeDiscovery(served ...*metav1.APIResourceList) *fakeDiscovery {
	return &fakeDiscovery{
		FakeDiscovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: append([]*metav1.APIResourceList(nil), served...)}},
		calls:         map[string]int{},
		fail:          map[string][]error{},
	}
}

func (d *fakeDiscovery) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[groupVersion]++
	if errs := d.fail[groupVersion]; len(errs) > 0 {
		d.fail[groupVersion] = errs[1:]
		return nil, errs[0]
	}
	return d.FakeDiscovery.ServerResourcesForGroupVersion(groupVersion)
}

// serve makes discovery list the group-version, replacing what it listed before.
func (d *fakeDiscovery) serve(list *metav1.APIResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, l := range d.Resources {
		if l.GroupVersion == list.GroupVersion {
			d.Resources[i] = list
			return
		}
	}
	d.Resources = append(d.Resources, list)
}

// failNext makes the next lookups of the group-version fail with errs, in order.
func (d *fakeDiscovery) failNext(groupVersion string, errs ...error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail[groupVersion] = append(d.fail[groupVersion], errs...)
}

func (d *fakeDiscovery) lookups(groupVersion string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[groupVersion]
}

// syncRecorder is a Handler the informers' goroutines may call concurrently.
type syncRecorder struct {
	mu        sync.Mutex
	changed   []catalog.SourceID
	created   []catalog.SourceID
	deleted   []catalog.SourceID
	workloads []catalog.WorkloadKey
}

func (r *syncRecorder) SourceChanged(id catalog.SourceID, _ []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, id)
}

func (r *syncRecorder) SourceCreated(id catalog.SourceID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created = append(r.created, id)
}

func (r *syncRecorder) SourceDeleted(id catalog.SourceID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, id)
}

func (r *syncRecorder) SourceAnnotated(catalog.SourceID) {}

func (r *syncRecorder) WorkloadChanged(key catalog.WorkloadKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workloads = append(r.workloads, key)
}

func (r *syncRecorder) sawWorkload(key catalog.WorkloadKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.workloads {
		if k == key {
			return true
		}
	}
	return false
}

func (r *syncRecorder) sawWorkloadOf(resource schema.GroupVersionResource) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.workloads {
		if k.Resource == resource {
			return true
		}
	}
	return false
}

func (r *syncRecorder) sources() (changed, created []catalog.SourceID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]catalog.SourceID(nil), r.changed...), append([]catalog.SourceID(nil), r.created...)
}

// syncBuffer collects the watcher's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixture is a Watcher wired to fakes.
type fixture struct {
	ctx  context.Context
	cfg  *config.Config
	w    *Watcher
	disc *fakeDiscovery
	dyn  *dynamicfake.FakeDynamicClient
	cat  *catalog.Catalog
	rec  *syncRecorder
	m    *metrics.Metrics
	log  *syncBuffer
}

// discoveryInterval is short so that Run finds a new kind at once; the tests
// wait on conditions, never on it.
const discoveryInterval = 5 * time.Millisecond

func newFixture(t *testing.T, cfg *config.Config, rc *rest.Config, disc *fakeDiscovery, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		ctx:  t.Context(),
		cfg:  cfg,
		disc: disc,
		dyn:  dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objects...),
		cat:  catalog.New(),
		rec:  &syncRecorder{},
		log:  &syncBuffer{},
	}
	f.m = metrics.New(f.cat.Counts)
	logger := hclog.New(&hclog.LoggerOptions{Output: f.log, Level: hclog.Debug})
	f.w = New(Deps{Config: cfg, Rest: rc, Dynamic: f.dyn, Discovery: disc, Catalog: f.cat, Handler: f.rec, Metrics: f.m, Log: logger,
		DiscoveryInterval: discoveryInterval})
	return f
}

// startErr looks the kinds up and starts watching them, as main does.
func (f *fixture) startErr() error {
	kinds, err := Resolve(f.cfg, f.disc)
	if err != nil {
		return err
	}
	return f.w.Start(f.ctx, kinds)
}

func (f *fixture) start(t *testing.T) {
	t.Helper()
	if err := f.startErr(); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func (f *fixture) waitForSync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	if err := f.w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
}

// watched returns restart_controller_workload_kind_watched by resource label.
func (f *fixture) watched(t *testing.T) map[string]float64 {
	return f.gauges(t, "restart_controller_workload_kind_watched", "resource")
}

// gauges returns a gauge's series, each keyed by the values of the given
// labels joined by "|". A series never set is absent, not 0.
func (f *fixture) gauges(t *testing.T, name string, labels ...string) map[string]float64 {
	t.Helper()
	families, err := f.m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, metric := range family.GetMetric() {
			values := map[string]string{}
			for _, l := range metric.GetLabel() {
				values[l.GetName()] = l.GetValue()
			}
			key := make([]string, len(labels))
			for i, l := range labels {
				key[i] = values[l]
			}
			out[strings.Join(key, "|")] = metric.GetGauge().GetValue()
		}
	}
	return out
}

// listed reports whether the dynamic client was asked to list the resource.
func (f *fixture) listed(resource schema.GroupVersionResource) bool {
	for _, a := range f.dyn.Actions() {
		if a.GetVerb() == "list" && a.GetResource() == resource {
			return true
		}
	}
	return false
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func exampleConfig(t *testing.T) *config.Config { return testfixture.ExampleConfig(t) }

func parseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// workload is an opted-in pod-template workload mounting a ConfigMap.
func workload(cfg *config.Config, resource schema.GroupVersionResource, kind, namespace, name, configMap string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"spec": map[string]interface{}{"template": map[string]interface{}{"spec": map[string]interface{}{
			"containers": []interface{}{map[string]interface{}{"name": "app", "image": "app:1"}},
			"volumes": []interface{}{map[string]interface{}{
				"name": "config", "configMap": map[string]interface{}{"name": configMap},
			}},
		}}},
	}}
	u.SetAPIVersion(resource.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetAnnotations(map[string]string{cfg.Annotations.OptIn: "enabled"})
	return u
}

func configMapObject(namespace, name string, data map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"data": data}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
