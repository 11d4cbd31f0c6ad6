package status

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// now is when the test worlds are decided.
var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// world is a cluster as status and explain list it: source and workload
// objects as the API server returns them, and the source kinds whose
// listing fails (the caller may not list them).
type world struct {
	t         testing.TB
	cfg       *explain.Config
	sources   map[catalog.SourceID]*unstructured.Unstructured
	workloads []explain.Workload
	forbidden map[string]bool // source kind names
}

func newWorld(t testing.TB, extraConfig string) *world {
	t.Helper()
	var data []byte
	if extraConfig != "" {
		data = []byte(extraConfig)
	}
	cfg, err := explain.ParseConfig(data, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sums, err = checksum.NewHasher(bytes.Repeat([]byte{9}, checksum.MinKeySize)); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, cfg: cfg, sources: map[catalog.SourceID]*unstructured.Unstructured{}, forbidden: map[string]bool{}}
}

func (w *world) sourceKind(name string) config.SourceKind {
	for _, k := range w.cfg.Sources {
		if k.Name == name {
			return k
		}
	}
	w.t.Fatalf("no source kind %s", name)
	return config.SourceKind{}
}

func (w *world) workloadKind(resource string) config.WorkloadKind {
	for _, k := range w.cfg.Workloads {
		if k.GVR.Resource == resource {
			return k
		}
	}
	w.t.Fatalf("no workload kind %s", resource)
	return config.WorkloadKind{}
}

// sourceObject is a ConfigMap or Secret of the data.
func sourceObject(kind, ns, name string, data map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": name, "namespace": ns}}}
	values := map[string]interface{}{}
	for k, v := range data {
		if kind == "secret" {
			v = base64.StdEncoding.EncodeToString([]byte(v))
		}
		values[k] = v
	}
	u.Object["data"] = values
	u.SetAPIVersion("v1")
	u.SetKind(map[string]string{"configmap": "ConfigMap", "secret": "Secret"}[kind])
	return u
}

// source adds a ConfigMap or Secret holding data.
func (w *world) source(kind, ns, name string, data map[string]string) catalog.SourceID {
	id := catalog.SourceID{Kind: kind, Namespace: ns, Name: name}
	w.sources[id] = sourceObject(kind, ns, name, data)
	return id
}

func (w *world) reduce(u *unstructured.Unstructured, kind string) *catalog.SourceState {
	w.t.Helper()
	r, err := catalog.ReduceSource(w.sourceKind(kind).DataFields, w.cfg.SourceAnnotations()...)(u.DeepCopy())
	if err != nil {
		w.t.Fatal(err)
	}
	return r.(*catalog.SourceState)
}

// sum is the checksum of every key of a source holding data.
func (w *world) sum(id catalog.SourceID, data map[string]string) string {
	return w.reduce(sourceObject(id.Kind, id.Namespace, id.Name, data), id.Kind).Checksum(w.cfg.Sums, nil)
}

// current is the checksum of a source as it is, and change its change.
func (w *world) current(id catalog.SourceID) string {
	return w.reduce(w.sources[id], id.Kind).Checksum(w.cfg.Sums, nil)
}

func (w *world) change(id catalog.SourceID) string {
	return w.reduce(w.sources[id], id.Kind).Change(w.cfg.Sums)
}

// annotate sets annotations on a source.
func (w *world) annotateSource(id catalog.SourceID, annotations map[string]string) {
	w.sources[id].SetAnnotations(annotations)
}

// deployment is a Deployment's wishes: what it reads, what its pods
// started with, its records.
type deployment struct {
	ns, name string
	reads    []catalog.SourceID // every key, through envFrom
	// applied are the checksums its pods started with, by source; a source
	// not named is recorded as it is now.
	applied     map[catalog.SourceID]string
	annotations map[string]string
	// rolling: its rollout is under way (1 replica, none updated);
	// otherwise it is complete.
	rolling bool
}

// add adds the Deployment, recorded against its current pod template.
func (w *world) add(d deployment) *unstructured.Unstructured {
	w.t.Helper()
	var envFrom []interface{}
	for _, id := range d.reads {
		ref := map[string]interface{}{"name": id.Name}
		if id.Kind == "secret" {
			envFrom = append(envFrom, map[string]interface{}{"secretRef": ref})
		} else {
			envFrom = append(envFrom, map[string]interface{}{"configMapRef": ref})
		}
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": d.name, "namespace": d.ns, "generation": int64(2)},
		"spec": map[string]interface{}{"replicas": int64(1), "template": map[string]interface{}{"spec": map[string]interface{}{
			"containers": []interface{}{map[string]interface{}{"name": "app", "image": "example/app:1", "envFrom": envFrom}}}}},
		"status": map[string]interface{}{"observedGeneration": int64(2), "replicas": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1)},
	}}
	if d.rolling {
		u.Object["status"].(map[string]interface{})["updatedReplicas"] = int64(0)
	}
	kind := w.workloadKind("deployments")
	reduced, err := catalog.ReduceWorkload(kind, w.cfg.Config)(u.DeepCopy())
	if err != nil {
		w.t.Fatal(err)
	}
	applied := map[string]string{}
	for _, id := range d.reads {
		if old, ok := d.applied[id]; ok {
			applied[id.String()] = old
		} else if _, exists := w.sources[id]; exists {
			applied[id.String()] = w.current(id)
		}
	}
	a := w.cfg.Annotations
	annotations := map[string]string{a.OptIn: "enabled", a.AppliedTemplateHash: reduced.(*catalog.WorkloadState).TemplateHash,
		a.AppliedChecksums: record.EncodeApplied(applied)}
	for k, v := range d.annotations {
		annotations[k] = v
	}
	u.SetAnnotations(annotations)
	w.workloads = append(w.workloads, explain.Workload{Kind: kind, Object: u})
	return u
}

// old is the data every source held before its change.
var old = map[string]string{"v": "0"}

// names are name-00 to name-(n-1).
func names(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", name, i)
	}
	return out
}

// rolloutRecord is a rollout annotation of a restart at at delivering the
// change of each source.
func rolloutRecord(at time.Time, delivered map[string]string, result, reason string, restarts ...time.Time) string {
	rec := &record.LastRestart{At: at, Sources: delivered, Reason: reason, Restarts: append(restarts, at)}
	rec.Result = rollout.Result(result)
	return record.Encode(rec)
}

// listing is the world as status lists it: everything, but the kinds
// forbidden.
func (w *world) listing(scope ...string) *Listing {
	w.t.Helper()
	if len(scope) == 0 {
		scope = []string{""}
	}
	l := NewListing(w.cfg, scope, nil)
	for _, k := range w.cfg.Sources {
		if w.forbidden[k.Name] {
			l.SourceKindFailed(k, "", errForbidden(k.GVR.Resource))
		}
	}
	for _, id := range sortedIDs(w.sources) {
		if w.forbidden[id.Kind] || !inScope(scope, id.Namespace) {
			continue
		}
		if err := l.AddSource(w.sourceKind(id.Kind), w.sources[id].DeepCopy()); err != nil {
			w.t.Fatal(err)
		}
	}
	for _, wl := range w.workloads {
		if inScope(scope, wl.Object.GetNamespace()) {
			l.AddWorkload(wl.Kind, wl.Object.DeepCopy())
		}
	}
	return l
}

func inScope(scope []string, ns string) bool {
	return slices.Contains(scope, "") || slices.Contains(scope, ns)
}

func errForbidden(resource string) error {
	return errors.New(resource + ` is forbidden: User "dev" cannot list resource "` + resource + `" in API group "" at the cluster scope`)
}

func sortedIDs(m map[catalog.SourceID]*unstructured.Unstructured) []catalog.SourceID {
	var ids []catalog.SourceID
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b catalog.SourceID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

// report is status over the world at now.
func (w *world) report() *Report {
	w.t.Helper()
	return Build(w.listing(), "all namespaces", now)
}

// explain is explain's report of a workload of the world, read as explain
// reads it: its sources one GET each, the workloads of its namespace
// listed.
func (w *world) explain(wl explain.Workload) *explain.WorkloadReport {
	w.t.Helper()
	fetch := func(kind config.SourceKind, ns, name string) (*catalog.SourceState, error) {
		if w.forbidden[kind.Name] {
			return nil, errForbidden(kind.GVR.Resource)
		}
		u, ok := w.sources[catalog.SourceID{Kind: kind.Name, Namespace: ns, Name: name}]
		if !ok {
			return nil, nil
		}
		return w.reduce(u, kind.Name), nil
	}
	fleet := func() []explain.Workload {
		var out []explain.Workload
		for _, o := range w.workloads {
			if o.Object.GetNamespace() == wl.Object.GetNamespace() {
				out = append(out, explain.Workload{Kind: o.Kind, Object: o.Object.DeepCopy()})
			}
		}
		return out
	}
	r := w.cfg.ExplainWorkload(wl.Kind, wl.Object.DeepCopy(), fetch, fleet, now)
	return r
}
