package keyread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
)

var testSums = func() checksum.Hasher {
	h, err := checksum.NewHasher(bytes.Repeat([]byte{7}, checksum.MinKeySize))
	if err != nil {
		panic(err)
	}
	return h
}()

// bounded is how the controller's caches reduce sources: a large one keeps
// only whole-object checksums.
func bounded(dataFields []string) catalog.SourceReducer {
	return catalog.SourceReducer{DataFields: dataFields, Bounded: true, Sums: testSums}
}

func reduceWith(t testing.TB, r catalog.SourceReducer, obj interface{}) *catalog.SourceState {
	t.Helper()
	out, err := r.Transform()(obj)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := out.(*catalog.SourceState)
	if !ok {
		t.Fatalf("reduced to %T", out)
	}
	return s
}

// bigConfigMap has n keys key-NNNNN, and "text" and "unicode": more than a
// source keeps one digest each for.
func bigConfigMap(n int, edit func(data map[string]string)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "shop", UID: "u-1", ResourceVersion: "10"},
		Data:       make(map[string]string, n),
	}
	for i := range n {
		cm.Data[fmt.Sprintf("key-%05d", i)] = fmt.Sprintf("value %d", i%7)
	}
	cm.Data["text"] = "AAEC"
	cm.Data["unicode"] = "grüße ✓\n\"quoted\""
	if edit != nil {
		edit(cm.Data)
	}
	return cm
}

// fakeFetch serves objects by name and counts fetches; block, when set,
// holds every fetch until closed.
type fakeFetch struct {
	mu      sync.Mutex
	objects map[string]k8sruntime.Object
	calls   int
	block   chan struct{}
	err     error
}

func (f *fakeFetch) fetch(ctx context.Context, kind config.SourceKind, namespace, name string) (k8sruntime.Object, error) {
	f.mu.Lock()
	f.calls++
	obj, err, block := f.objects[namespace+"/"+name], f.err, f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	return obj, err
}

func (f *fakeFetch) set(obj *corev1.ConfigMap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[obj.Namespace+"/"+obj.Name] = obj
}

var configMapKind = config.SourceKind{Name: "configmap", DataFields: []string{"data", "binaryData"}}

func newTestReader(capacity int) (*Reader, *fakeFetch) {
	f := &fakeFetch{objects: map[string]k8sruntime.Object{}}
	return New([]config.SourceKind{configMapKind}, f.fetch, capacity), f
}

// The reader's plumbing: it reads what is not cached, once, and only
// data the cache holds.
func TestReader(t *testing.T) {
	ctx := context.Background()
	id := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "big"}
	cm := bigConfigMap(300, nil)
	r, f := newTestReader(Capacity)
	f.set(cm)
	cached := reduceWith(t, bounded(configMapKind.DataFields), cm)

	read, err := r.Read(ctx, id, cached, []string{"text", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	full := reduceWith(t, catalog.SourceReducer{DataFields: configMapKind.DataFields}, cm)
	if got, want := read.Checksum(testSums, []string{"absent", "text"}), full.Checksum(testSums, []string{"absent", "text"}); got == "" || got != want {
		t.Fatalf("read checksum %q, want %q", got, want)
	}
	if read.ResourceVersion != cached.ResourceVersion || cached.Covers([]string{"text"}) {
		t.Fatal("the read is not a copy of the cached state, or changed it")
	}
	// Same keys of the same data, also after a metadata-only update: no new fetch.
	relabelled := cached.DeepCopyObject().(*catalog.SourceState)
	relabelled.ResourceVersion = "11"
	for _, s := range []*catalog.SourceState{cached, relabelled} {
		again, err := r.Read(ctx, id, s, []string{"absent", "text", "text"})
		if err != nil || again.ResourceVersion != s.ResourceVersion {
			t.Fatalf("read again: %v, %v", again, err)
		}
	}
	if f.calls != 1 {
		t.Fatalf("%d fetches for one read of one version of the data", f.calls)
	}
	// Covered reads, small states and whole reads need no fetch.
	for _, keys := range [][]string{nil, {}} {
		if s, err := r.Read(ctx, id, cached, keys); err != nil || s != cached {
			t.Errorf("read of %q: %v, %v", keys, s, err)
		}
	}
	if s, err := r.Read(ctx, id, full, []string{"text"}); err != nil || s != full {
		t.Errorf("read of a per-key state: %v, %v", s, err)
	}
	if f.calls != 1 {
		t.Fatalf("%d fetches, want 1", f.calls)
	}

	// The API server has other data than the cache: stale, whichever is newer.
	changed := bigConfigMap(300, func(d map[string]string) { d["other"] = "x" })
	f.set(changed)
	if _, err := r.Read(ctx, id, cached, []string{"unicode"}); !errors.Is(err, ErrStale) {
		t.Fatalf("read of data the API server no longer holds: %v, want ErrStale", err)
	}
	newer := reduceWith(t, bounded(configMapKind.DataFields), changed)
	if _, err := r.Read(ctx, id, newer, []string{"unicode"}); err != nil {
		t.Fatalf("read once the cache caught up: %v", err)
	}
	delete(f.objects, "shop/big")
	if _, err := r.Read(ctx, id, newer, []string{"key-00001"}); !errors.Is(err, ErrStale) {
		t.Fatalf("read of a deleted source: %v, want ErrStale", err)
	}
	f.err = errors.New("connection refused")
	if _, err := r.Read(ctx, id, newer, []string{"key-00001"}); err == nil || errors.Is(err, ErrStale) {
		t.Fatalf("fetch error: %v", err)
	}
	if _, err := r.Read(ctx, catalog.SourceID{Kind: "widget", Namespace: "shop", Name: "big"}, newer, []string{"x"}); err == nil {
		t.Fatal("read of an unknown kind")
	}
}

func TestReaderReadsOnceForConcurrentReaders(t *testing.T) {
	id := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "big"}
	cm := bigConfigMap(300, nil)
	r, f := newTestReader(Capacity)
	f.set(cm)
	f.block = make(chan struct{})
	cached := reduceWith(t, bounded(configMapKind.DataFields), cm)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Read(context.Background(), id, cached, []string{"text"})
			errs <- err
		}()
	}
	for { // every reader has joined the one fetch
		r.mu.Lock()
		c := r.calls[readKey{id, cached.Whole.Data, "text"}]
		r.mu.Unlock()
		if c != nil {
			break
		}
		runtime.Gosched()
	}
	close(f.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if f.calls != 1 {
		t.Fatalf("%d fetches for 10 concurrent reads of the same keys", f.calls)
	}
}

func TestReaderIsBounded(t *testing.T) {
	id := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "big"}
	cm := bigConfigMap(300, nil)
	r, f := newTestReader(4)
	f.set(cm)
	cached := reduceWith(t, bounded(configMapKind.DataFields), cm)
	read := func(keys ...string) {
		t.Helper()
		if _, err := r.Read(context.Background(), id, cached, keys); err != nil {
			t.Fatal(err)
		}
	}
	read("key-00001", "key-00002")
	read("key-00003", "key-00004")
	read("key-00001", "key-00002") // used last: key-00003/4 goes first
	read("key-00005")
	if r.held > 4 || len(r.entries) != 2 || r.lru.Len() != 2 {
		t.Fatalf("held %d digests in %d entries, capacity 4", r.held, len(r.entries))
	}
	calls := f.calls
	read("key-00001", "key-00002")
	if f.calls != calls {
		t.Error("the most recently used entry was dropped")
	}
	read("key-00003", "key-00004")
	if f.calls != calls+1 {
		t.Error("the least recently used entry was kept")
	}
	read("key-00001", "key-00002", "key-00003", "key-00004", "key-00005") // more than the capacity: read, not kept
	if r.held > 4 {
		t.Fatalf("held %d digests, capacity 4", r.held)
	}
}
