package restart

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/keyread"
)

// keyReaderDeployment reads one key of the ConfigMap "app" by env, and
// another of it by a volume's items.
const keyReaderDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  resourceVersion: "42"
  annotations: {com.xing.deployment-restart: enabled}
spec:
  template:
    spec:
      containers:
      - name: app
        image: shop/web:1
        env: [{name: LEVEL, valueFrom: {configMapKeyRef: {name: app, key: level}}}]
      volumes: [{name: v, configMap: {name: app, items: [{key: absent, path: a}]}}]
`

// largeApp is the ConfigMap "app" with more keys than a cached state keeps
// digests for.
func largeApp(rv string, edit func(map[string]string)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop", ResourceVersion: rv},
		Data:       map[string]string{"level": "info"},
	}
	for i := range catalog.MaxDigestKeys + 1 {
		cm.Data[fmt.Sprintf("k%04d", i)] = ""
	}
	if edit != nil {
		edit(cm.Data)
	}
	return cm
}

// fetchFrom serves the one ConfigMap the test's API server holds.
type fetchFrom struct {
	cm    *corev1.ConfigMap
	calls int
}

func (f *fetchFrom) fetch(_ context.Context, _ config.SourceKind, namespace, name string) (runtime.Object, error) {
	f.calls++
	if f.cm == nil || f.cm.Namespace != namespace || f.cm.Name != name {
		return nil, nil
	}
	return f.cm, nil
}

// The plumbing of keyed reads of a large source: the reconcile reads the
// keys the workload reads, before the decision, and the decision then is the
// one the per-key form of the same data gives. The API server is a fake that
// serves the object; what is tested is ours.
func TestReconcileReadsKeysOfLargeSource(t *testing.T) {
	fields := []string{"data", "binaryData"}
	bounded := catalog.SourceReducer{DataFields: fields, Bounded: true, Sums: testSums}.Transform()
	perKey := catalog.ReduceSource(fields)
	reduce := func(transform func(interface{}) (interface{}, error), cm *corev1.ConfigMap) *catalog.SourceState {
		out, err := transform(cm)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*catalog.SourceState)
	}
	keys := []string{"absent", "level"}
	// The workload's pods started with v1; its checksum is the per-key form's.
	v1 := largeApp("100", nil)
	settled := func(t *testing.T) *unstructured.Unstructured {
		u := fromYAML(t, keyReaderDeployment)
		w := newHarness(t, nil, nil, nil).reduce(u)
		if len(w.References) != 1 || strings.Join(w.References[0].Keys, ",") != "absent,level" {
			t.Fatalf("references %+v", w.References)
		}
		ann := u.GetAnnotations()
		ann[appliedKey] = annotation(t, map[string]string{cmApp.String(): reduce(perKey, v1).Checksum(testSums, keys)})
		ann[templateHashKey] = w.TemplateHash
		u.SetAnnotations(ann)
		return u
	}
	run := func(t *testing.T, cached, served *corev1.ConfigMap, reader bool) (*harness, *fetchFrom, error) {
		u := settled(t)
		h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, nil)
		state := reduce(bounded, cached)
		if !state.Large() {
			t.Fatal("the cached state is not large")
		}
		if err := h.sources.Update(state); err != nil {
			t.Fatal(err)
		}
		f := &fetchFrom{cm: served}
		if reader {
			h.c.Keys = keyread.New(h.cfg.Sources, f.fetch, keyread.Capacity)
		}
		err := h.c.Reconcile(context.Background(), catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "shop", Name: "web"})
		return h, f, err
	}

	t.Run("unchanged: nothing written", func(t *testing.T) {
		h, f, err := run(t, v1, v1, true)
		if err != nil || len(h.patches()) != 0 || f.calls != 1 {
			t.Fatalf("err %v, patches %v, fetches %d", err, h.patches(), f.calls)
		}
	})
	t.Run("a key it does not read changed: nothing written", func(t *testing.T) {
		v2 := largeApp("101", func(d map[string]string) { d["k0007"] = "changed"; d["new"] = "" })
		h, _, err := run(t, v2, v2, true)
		if err != nil || len(h.patches()) != 0 {
			t.Fatalf("err %v, patches %v", err, h.patches())
		}
	})
	for _, change := range []struct {
		name string
		edit func(map[string]string)
	}{
		{"the key it reads changed", func(d map[string]string) { d["level"] = "debug" }},
		{"a key it reads appeared", func(d map[string]string) { d["absent"] = "" }},
	} {
		t.Run(change.name+": restarted with the per-key form's checksum", func(t *testing.T) {
			v2 := largeApp("101", change.edit)
			h, _, err := run(t, v2, v2, true)
			if err != nil {
				t.Fatal(err)
			}
			applied := annotation(t, map[string]string{cmApp.String(): reduce(perKey, v2).Checksum(testSums, keys)})
			want := patchBody("42", applied, h.reduce(fromYAML(t, keyReaderDeployment)).TemplateHash, "spec.template", true)
			if p := h.patches(); len(p) != 1 || withoutRecord(t, p[0].GetPatch()) != want {
				t.Fatalf("patches %v, want one:\n%s", p, want)
			}
		})
	}
	t.Run("the API server has newer data: wait for the cache", func(t *testing.T) {
		v2 := largeApp("101", func(d map[string]string) { d["level"] = "debug" })
		h, _, err := run(t, v1, v2, true)
		if !errors.Is(err, errCacheBehind) || len(h.patches()) != 0 {
			t.Fatalf("err %v, patches %v; want the cache waited for", err, h.patches())
		}
	})
	t.Run("deleted on the API server, still cached: wait for the cache", func(t *testing.T) {
		h, _, err := run(t, v1, nil, true)
		if !errors.Is(err, errCacheBehind) || len(h.patches()) != 0 {
			t.Fatalf("err %v, patches %v; want the cache waited for", err, h.patches())
		}
	})
	t.Run("no key reader: an error, nothing written", func(t *testing.T) {
		h, _, err := run(t, v1, v1, false)
		if err == nil || errors.Is(err, errCacheBehind) || len(h.patches()) != 0 {
			t.Fatalf("err %v, patches %v", err, h.patches())
		}
	})
}

// A workload reading the whole of a large source is decided from the cached
// whole-object checksums, without reading anything.
func TestReconcileWholeReadOfLargeSource(t *testing.T) {
	fields := []string{"data", "binaryData"}
	bounded := catalog.SourceReducer{DataFields: fields, Bounded: true, Sums: testSums}.Transform()
	reduce := func(transform func(interface{}) (interface{}, error), cm *corev1.ConfigMap) *catalog.SourceState {
		out, err := transform(cm)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*catalog.SourceState)
	}
	v1, v2 := largeApp("100", nil), largeApp("101", func(d map[string]string) { d["k0001"] = "x" })
	for _, tc := range []struct {
		name      string
		cached    *corev1.ConfigMap
		recorded  func(*catalog.SourceState) string
		wantPatch bool
	}{
		{"unchanged", v1, func(s *catalog.SourceState) string { return s.Checksum(testSums, nil) }, false},
		{"unchanged, version 1 recorded: re-recorded", v1, func(s *catalog.SourceState) string { sum, _ := s.ChecksumOf(1, nil); return sum }, true},
		{"changed", v2, func(s *catalog.SourceState) string { return s.Checksum(testSums, nil) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := fromYAML(t, webDeployment)
			w := newHarness(t, nil, nil, nil).reduce(u)
			ann := u.GetAnnotations()
			ann[appliedKey] = annotation(t, map[string]string{cmApp.String(): tc.recorded(reduce(catalog.ReduceSource(fields), v1))})
			ann[templateHashKey] = w.TemplateHash
			u.SetAnnotations(ann)
			h := newHarness(t, []*unstructured.Unstructured{u}, []*unstructured.Unstructured{u}, nil)
			if err := h.sources.Update(reduce(bounded, tc.cached)); err != nil {
				t.Fatal(err)
			}
			f := &fetchFrom{cm: tc.cached}
			h.c.Keys = keyread.New(h.cfg.Sources, f.fetch, keyread.Capacity)
			if err := h.c.Reconcile(context.Background(), catalog.WorkloadKey{Resource: deploymentsGVR, Namespace: "shop", Name: "web"}); err != nil {
				t.Fatal(err)
			}
			if f.calls != 0 || (len(h.patches()) == 1) != tc.wantPatch {
				t.Fatalf("fetches %d, patches %v; want a patch: %v", f.calls, h.patches(), tc.wantPatch)
			}
			if tc.wantPatch {
				want := reduce(catalog.ReduceSource(fields), tc.cached).Checksum(testSums, nil)
				if !strings.Contains(string(h.patches()[0].GetPatch()), want) {
					t.Fatalf("patch %s does not record %s", h.patches()[0].GetPatch(), want)
				}
			}
		})
	}
}
