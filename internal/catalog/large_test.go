package catalog

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/checksum"
)

// bounded is how the controller's caches reduce sources.
func bounded(dataFields []string) SourceReducer {
	return SourceReducer{DataFields: dataFields, Bounded: true, Sums: testSums}
}

func reduceWith(t testing.TB, r SourceReducer, obj interface{}) *SourceState {
	t.Helper()
	out, err := r.Transform()(obj)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := out.(*SourceState)
	if !ok {
		t.Fatalf("reduced to %T", out)
	}
	return s
}

// toUnstructured is the object as the dynamic client (JSON) gives it.
func toUnstructured(t testing.TB, obj k8sruntime.Object) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// bigConfigMap has n keys in data (some empty, some sharing a value) plus
// the keys in binaryData: more than MaxDigestKeys when n is.
func bigConfigMap(n int, binary map[string][]byte, edit func(data map[string]string)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "shop", UID: "u-1", ResourceVersion: "10", Labels: map[string]string{"a": "b"}},
		Data:       make(map[string]string, n),
		BinaryData: binary,
	}
	for i := range n {
		v := fmt.Sprintf("value %d", i%7)
		if i%5 == 0 {
			v = ""
		}
		cm.Data[fmt.Sprintf("key-%05d", i)] = v
	}
	cm.Data["text"] = "AAEC"
	cm.Data["unicode"] = "grüße ✓\n\"quoted\""
	if edit != nil {
		edit(cm.Data)
	}
	return cm
}

// keyedReads are the reads compared: present keys in data and binaryData,
// absent keys, no keys at all, one key.
var keyedReads = [][]string{
	{}, {"text"}, {"bin"}, {"absent"}, {"key-00000", "key-00001"},
	{"absent", "bin", "key-00299", "text", "unicode"}, {"none", "zz-absent"},
}

// assertSameChecksums checks that large answers every read exactly as small,
// the per-key form of the same data, does: every version, whole and keyed.
func assertSameChecksums(t *testing.T, small, large *SourceState, reads [][]string) {
	t.Helper()
	if small.Large() || !large.Large() {
		t.Fatalf("forms: small.Large() = %v, large.Large() = %v", small.Large(), large.Large())
	}
	for _, keys := range append([][]string{nil}, reads...) {
		read := large
		if keys != nil {
			if large.Covers(keys) && len(keys) > 0 {
				t.Fatalf("a large state answers keyed reads of %q without their digests", keys)
			}
			read = large.WithKeys(keysOf(t, small, keys))
		}
		want, got := small.Checksum(testSums, keys), read.Checksum(testSums, keys)
		if want == "" || got != want {
			t.Errorf("Checksum(%q): per key %q, large %q", keys, want, got)
		}
		for _, v := range []int{1} { // the unkeyed versions; the keyed one above
			want, _ := small.ChecksumOf(v, keys)
			got, ok := read.ChecksumOf(v, keys)
			if !ok || got != want {
				t.Errorf("ChecksumOf(%d, %q): per key %q, large %q", v, keys, want, got)
			}
			if !read.Matches(testSums, want, keys) {
				t.Errorf("large does not match the version-%d checksum of the same data", v)
			}
		}
		if !read.Matches(testSums, want, keys) || !small.Matches(testSums, got, keys) {
			t.Errorf("current checksums of %q do not match across forms", keys)
		}
	}
}

// keysOf is what ReduceKeys gives for keys: their digests and fields, from
// the per-key form (the fetch path is compared with it separately).
func keysOf(t *testing.T, small *SourceState, keys []string) *KeyDigests {
	t.Helper()
	sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
	digests := map[string]checksum.Digest{}
	var fields map[string]string
	for _, k := range sorted {
		if d, ok := small.Digests.Get(k); ok {
			digests[k] = d
			if f, ok := small.Fields[k]; ok {
				if fields == nil {
					fields = map[string]string{}
				}
				fields[k] = f
			}
		}
	}
	return &KeyDigests{Keys: sorted, Digests: digests, Fields: fields}
}

// The checksums recorded on workloads must not depend on the form a source
// is cached in: a source that grows past the bound (or a controller that
// bounds sources, upgrading one that did not) must not restart anything.
func TestLargeSourceChecksumsEqualPerKeyForm(t *testing.T) {
	cmFields := []string{"data", "binaryData"}
	cm := bigConfigMap(300, map[string][]byte{"bin": {0, 1, 2}, "none": {}}, nil)
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "shop"},
		Data:       map[string][]byte{"bin": {9}, "text": []byte("AAEC")},
	}
	for i := range 400 {
		secret.Data[fmt.Sprintf("key-%05d", i)] = []byte{byte(i)}
	}
	custom := toUnstructured(t, cm)
	custom.SetAPIVersion("example.com/v1")
	custom.SetKind("Settings")
	spec := map[string]interface{}{"n": int64(5), "m": map[string]interface{}{"x": "y"}, "text": "in spec too"}
	for i := range 300 {
		spec[fmt.Sprintf("key-%05d", i)] = []interface{}{int64(i), "x"}
	}
	custom.Object["spec"] = spec
	cases := []struct {
		name   string
		obj    k8sruntime.Object
		fields []string
	}{
		{"configmap, typed", cm, cmFields},
		{"configmap, unstructured", toUnstructured(t, cm), cmFields},
		{"secret, typed", secret, []string{"data"}},
		{"secret, unstructured", toUnstructured(t, secret), []string{"data"}},
		// A key in two fields ("text" in data and spec): the later one holds it.
		{"custom kind with non-string values", custom, []string{"data", "spec"}},
		{"custom kind, fields the other way", custom, []string{"spec", "data"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			small := reduceWith(t, SourceReducer{DataFields: tc.fields}, tc.obj)
			large := reduceWith(t, bounded(tc.fields), tc.obj)
			if large.Digests != nil || large.Fields != nil || large.Whole.KeyID != testSums.KeyID() || large.Whole.Keys != len(small.Digests) {
				t.Fatalf("large state keeps per-key data or lacks its key: %+v", large)
			}
			if large.Name != "big" || large.Namespace != "shop" || large.ResourceVersion != small.ResourceVersion || large.GroupVersionKind() != small.GroupVersionKind() {
				t.Fatalf("identity: %+v, want %+v", large.Meta, small.Meta)
			}
			assertSameChecksums(t, small, large, keyedReads)
			if !large.SameData(small) || !small.SameData(large) {
				t.Error("the same data in two forms is not the same data")
			}
			// The reduction of a fetched object (ReduceKeys) gives the
			// digests that the per-key form has, whichever way it came.
			for _, keys := range keyedReads {
				want := large.WithKeys(keysOf(t, small, keys))
				sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
				e, err := ReduceKeys(tc.obj, tc.fields, sorted)
				if err != nil {
					t.Fatal(err)
				}
				if e.Data != large.Whole.Data {
					t.Fatal("the fetched object's data digest is not the cached one's")
				}
				got := large.WithKeys(e)
				if !reflect.DeepEqual(got.Digests, want.Digests) || !reflect.DeepEqual(got.Fields, want.Fields) || got.Checksum(testSums, keys) != small.Checksum(testSums, keys) {
					t.Errorf("keys %q: fetched digests %v %v, want %v %v", keys, got.Digests, got.Fields, want.Digests, want.Fields)
				}
			}
		})
	}
}

// Protobuf (typed) and JSON (unstructured) give the same large state, and
// the same keyed reads: a fetch may take either path.
func TestLargeSourceTypedAndUnstructuredAgree(t *testing.T) {
	cm := bigConfigMap(1000, map[string][]byte{"bin": {0, 1, 2, 255}}, nil)
	fields := []string{"data", "binaryData"}
	typed := reduceWith(t, bounded(fields), cm)
	fromJSON := reduceWith(t, bounded(fields), toUnstructured(t, cm))
	if !reflect.DeepEqual(typed.Whole, fromJSON.Whole) {
		t.Fatalf("whole sums differ:\n typed %+v\n  json %+v", typed.Whole, fromJSON.Whole)
	}
	keys := []string{"absent", "bin", "key-00007", "text"}
	a, err := ReduceKeys(cm, fields, keys)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReduceKeys(toUnstructured(t, cm), fields, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Digests) != 3 || !reflect.DeepEqual(a.Digests, b.Digests) || !reflect.DeepEqual(a.Fields, b.Fields) || a.Fields["bin"] != "binaryData" {
		t.Fatalf("keyed reads differ:\n typed %v %v\n  json %v %v", a.Digests, a.Fields, b.Digests, b.Fields)
	}
}

// The bound is tested at its edge, one below and one above, for the number
// of keys and for the bytes of their names, through every way a source
// enters the cache: typed, JSON (unstructured) and protobuf (the codec
// counts entries in the encoding, apart from the typed count).
func TestLargeSourceBound(t *testing.T) {
	fields := []string{"data", "binaryData"}
	// withKeys has n keys, binary of them in binaryData, named in
	// nameBytes bytes in all (each name at least 4 bytes, the last one
	// taking what is left), or 4 bytes each when nameBytes is 0.
	withKeys := func(n, nameBytes, binary int) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "shop"}, Data: map[string]string{}, BinaryData: map[string][]byte{}}
		width := 4
		if nameBytes > 0 {
			width = nameBytes / n
		}
		for i := range n {
			name := fmt.Sprintf("%0*d", width, i)
			if i == n-1 && nameBytes > 0 {
				name = fmt.Sprintf("%0*d", nameBytes-width*(n-1), i)
			}
			if i < binary {
				cm.BinaryData[name] = []byte{1}
			} else {
				cm.Data[name] = "v"
			}
		}
		return cm
	}
	names := func(cm *corev1.ConfigMap) (keys, bytes int) {
		for k := range cm.Data {
			keys, bytes = keys+1, bytes+len(k)
		}
		for k := range cm.BinaryData {
			keys, bytes = keys+1, bytes+len(k)
		}
		return keys, bytes
	}
	// Names of 64 bytes: MaxDigestKeyBytes/64 keys are well within
	// MaxDigestKeys, so only the bytes bound is reached.
	const wide = MaxDigestKeyBytes / 64
	inBoth := withKeys(MaxDigestKeys, 0, 0)
	inBoth.BinaryData["0000"] = []byte{1} // one key in two fields counts twice
	for _, tc := range []struct {
		name        string
		obj         *corev1.ConfigMap
		keys, bytes int // as counted, to show the case is where it says
		large       bool
	}{
		{"one key below the key bound", withKeys(MaxDigestKeys-1, 0, 0), MaxDigestKeys - 1, 4 * (MaxDigestKeys - 1), false},
		{"at the key bound", withKeys(MaxDigestKeys, 0, 0), MaxDigestKeys, 4 * MaxDigestKeys, false},
		{"one key over", withKeys(MaxDigestKeys+1, 0, 0), MaxDigestKeys + 1, 4 * (MaxDigestKeys + 1), true},
		{"at the key bound, counting binaryData", withKeys(MaxDigestKeys, 0, 100), MaxDigestKeys, 4 * MaxDigestKeys, false},
		{"one over, counting binaryData", withKeys(MaxDigestKeys+1, 0, 100), MaxDigestKeys + 1, 4 * (MaxDigestKeys + 1), true},
		{"at the key bound, one key in both fields", inBoth, MaxDigestKeys + 1, 4 * (MaxDigestKeys + 1), true},
		{"names one byte below the bound", withKeys(wide, MaxDigestKeyBytes-1, 0), wide, MaxDigestKeyBytes - 1, false},
		{"names at the bound", withKeys(wide, MaxDigestKeyBytes, 0), wide, MaxDigestKeyBytes, false},
		{"names one byte over", withKeys(wide, MaxDigestKeyBytes+1, 0), wide, MaxDigestKeyBytes + 1, true},
		{"names one byte over, in binaryData", withKeys(wide, MaxDigestKeyBytes+1, wide), wide, MaxDigestKeyBytes + 1, true},
		{"empty", withKeys(0, 0, 0), 0, 0, false},
	} {
		if keys, bytes := names(tc.obj); keys != tc.keys || bytes != tc.bytes {
			t.Fatalf("%s: the fixture has %d keys in %d bytes of names, want %d in %d", tc.name, keys, bytes, tc.keys, tc.bytes)
		}
		objects, _ := reducing(t, bounded(fields), configMapGVK)
		for way, s := range map[string]*SourceState{
			"typed":        reduceWith(t, bounded(fields), tc.obj),
			"unstructured": reduceWith(t, bounded(fields), toUnstructured(t, tc.obj)),
			"protobuf":     decodeState(t, objects, encode(t, tc.obj)),
		} {
			if s.Large() != tc.large {
				t.Errorf("%s, %s: Large() = %v, want %v", tc.name, way, s.Large(), tc.large)
			}
			if s.Large() == (s.Digests != nil) {
				t.Errorf("%s, %s: Large() = %v with digests %v", tc.name, way, s.Large(), s.Digests != nil)
			}
		}
	}
	// Unbounded (explain, tests) keeps every key.
	if s := reduceWith(t, SourceReducer{DataFields: fields}, withKeys(5000, 0, 0)); s.Large() || len(s.Digests) != 5000 {
		t.Errorf("unbounded reduction: Large() = %v, %d digests", s.Large(), len(s.Digests))
	}
}

// Every data change of a large source is a change; a metadata-only change
// is not. Change detection (SameData) is what makes a source event reconcile
// its readers.
func TestLargeSourceSameData(t *testing.T) {
	fields := []string{"data", "binaryData"}
	r := bounded(fields)
	base := reduceWith(t, r, bigConfigMap(400, map[string][]byte{"bin": {1}}, nil))
	relabelled := bigConfigMap(400, map[string][]byte{"bin": {1}}, nil)
	relabelled.Labels = map[string]string{"other": "label"}
	relabelled.ResourceVersion = "11"
	moved := bigConfigMap(400, map[string][]byte{"bin": {1}, "text": {0, 1, 2}}, func(d map[string]string) { delete(d, "text") })
	movedSameText := bigConfigMap(400, map[string][]byte{"bin": {1}}, nil) // "text" is "AAEC" in data...
	delete(movedSameText.Data, "text")
	movedSameText.BinaryData["text"] = []byte{0, 1, 2} // ...and AAEC as base64 in binaryData
	for _, tc := range []struct {
		name string
		obj  *corev1.ConfigMap
		same bool
	}{
		{"identical", bigConfigMap(400, map[string][]byte{"bin": {1}}, nil), true},
		{"labels and resourceVersion", relabelled, true},
		{"one value", bigConfigMap(400, map[string][]byte{"bin": {1}}, func(d map[string]string) { d["key-00123"] = "changed" }), false},
		{"one value emptied", bigConfigMap(400, map[string][]byte{"bin": {1}}, func(d map[string]string) { d["key-00001"] = "" }), false},
		{"binaryData value", bigConfigMap(400, map[string][]byte{"bin": {2}}, nil), false},
		{"key added", bigConfigMap(400, map[string][]byte{"bin": {1}}, func(d map[string]string) { d["new"] = "" }), false},
		{"key removed", bigConfigMap(400, map[string][]byte{"bin": {1}}, func(d map[string]string) { delete(d, "key-00002") }), false},
		{"key renamed", bigConfigMap(400, map[string][]byte{"bin": {1}}, func(d map[string]string) {
			d["key-x"] = d["key-00003"]
			delete(d, "key-00003")
		}), false},
		{"key moved to binaryData", moved, false},
		{"key moved to binaryData, same text", movedSameText, false},
		{"shrunk below the bound", bigConfigMap(0, nil, nil), false},
	} {
		other := reduceWith(t, r, tc.obj)
		if base.SameData(other) != tc.same || other.SameData(base) != tc.same {
			t.Errorf("%s: SameData = %v / %v, want %v", tc.name, base.SameData(other), other.SameData(base), tc.same)
		}
	}
	if base.Checksum(testSums, nil) == reduceWith(t, r, movedSameText).Checksum(testSums, nil) {
		t.Error("a key moved to binaryData with the same text keeps the whole-object checksum")
	}
}

// A large state answers only the reads it can: whole reads, and keyed reads
// of the keys it holds digests for. Any other read gives nothing, never the
// checksum of other data.
func TestLargeSourceRefusesReadsItCannotAnswer(t *testing.T) {
	fields := []string{"data", "binaryData"}
	cm := bigConfigMap(300, nil, nil)
	small := reduceWith(t, SourceReducer{DataFields: fields}, cm)
	large := reduceWith(t, bounded(fields), cm)
	if large.Checksum(testSums, []string{"text"}) != "" || large.Matches(testSums, small.Checksum(testSums, []string{"text"}), []string{"text"}) {
		t.Error("a keyed read without the key's digest was answered")
	}
	if _, ok := large.ChecksumOf(1, []string{"text"}); ok {
		t.Error("a version-1 keyed read without the key's digest was answered")
	}
	read := large.WithKeys(keysOf(t, small, []string{"text"}))
	if read.Checksum(testSums, []string{"text", "unicode"}) != "" {
		t.Error("a read of a key not covered was answered")
	}
	// A state reduced without a key, or with another, has no keyed
	// whole-object checksum to give.
	other := mustHasher(make([]byte, checksum.MinKeySize))
	if large.Checksum(other, nil) != "" {
		t.Error("a whole-object checksum under another key was answered")
	}
	unkeyed := reduceWith(t, SourceReducer{DataFields: fields, Bounded: true}, cm)
	if unkeyed.Checksum(testSums, nil) != "" || unkeyed.Whole.KeyID != "" {
		t.Error("a state reduced without a key gave a keyed checksum")
	}
	if v1, _ := unkeyed.ChecksumOf(1, nil); v1 != mustChecksumOf(t, small, 1) {
		t.Error("unkeyed versions need no key")
	}
}

func mustChecksumOf(t *testing.T, s *SourceState, v int) string {
	t.Helper()
	sum, ok := s.ChecksumOf(v, nil)
	if !ok {
		t.Fatalf("version %d unknown", v)
	}
	return sum
}

func TestLargeSourceDeepCopy(t *testing.T) {
	fields := []string{"data", "binaryData"}
	cm := bigConfigMap(300, nil, nil)
	large := reduceWith(t, bounded(fields), cm)
	read := large.WithKeys(keysOf(t, reduceWith(t, SourceReducer{DataFields: fields}, cm), []string{"text"}))
	for _, s := range []*SourceState{large, read} {
		c := s.DeepCopyObject().(*SourceState)
		if !reflect.DeepEqual(s, c) {
			t.Fatalf("copy differs:\n%#v\n%#v", s, c)
		}
		c.Whole.V3[0]++
		if c.Whole.V3 == s.Whole.V3 {
			t.Error("copy shares its whole sums")
		}
	}
}

// retained returns the heap that n values made by make keep alive, per value,
// once whatever making them allocated on the way is collected.
func retained(t *testing.T, n int, make func() interface{}) float64 {
	t.Helper()
	var before, after runtime.MemStats
	make() // anything made once and kept (a sync.Pool's buffers) is not per value
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := make0(n, make)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}

func make0(n int, make func() interface{}) []interface{} {
	held := []interface{}{}
	for range n {
		held = append(held, make())
	}
	return held
}

// What a large source costs in the cache does not grow with its keys: the
// 80,000 empty keys of a valid 1 MB ConfigMap cost 3.7 MiB each as
// per-key digests, and far less bounded.
//
// It runs under the race detector too, which CI always uses: the heap it
// measures holds no shadow memory, so the figures are the same; only the
// time grows, so fewer states are measured there.
func TestLargeSourceCostDoesNotGrowWithKeys(t *testing.T) {
	copies := 50
	if raceEnabled {
		copies = 10
	}
	fields := []string{"data", "binaryData"}
	emptyKeys := func(n int) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "unrelated", UID: "0b8e2f2c-0000-4000-8000-000000000001", ResourceVersion: "123456"}, Data: make(map[string]string, n)}
		for i := range n {
			cm.Data[fmt.Sprintf("k%05d", i)] = ""
		}
		return cm
	}
	costs := map[int]float64{}
	for _, n := range []int{1000, 80000} {
		cm := emptyKeys(n)
		costs[n] = retained(t, copies, func() interface{} { return reduceWith(t, bounded(fields), cm) })
		runtime.KeepAlive(cm) // the decoded object is the informer's, not the cache's
		t.Logf("%d keys: %.0f bytes per cached state", n, costs[n])
		if costs[n] > 2048 {
			t.Errorf("a source of %d keys costs %.0f bytes in the cache; want at most 2 KiB", n, costs[n])
		}
	}
	// The control: the same measure sees the per-key form's cost, at least
	// the 32 bytes of each key's digest and name, so the bound above is not
	// met by a measure that sees nothing.
	const perKeyKeys = 20000
	perKeyCM := emptyKeys(perKeyKeys)
	perKey := retained(t, 2, func() interface{} {
		return reduceWith(t, SourceReducer{DataFields: fields}, perKeyCM)
	})
	runtime.KeepAlive(perKeyCM)
	t.Logf("%d keys, one digest each: %.1f MiB per cached state", perKeyKeys, perKey/(1<<20))
	if perKey < 32*perKeyKeys {
		t.Errorf("%d keys in per-key form measured %.0f bytes: less than their digests", perKeyKeys, perKey)
	}
	// The most a state in per-key form costs (the comment on MaxDigestKeys).
	widest := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: "shop"}, Data: map[string]string{}}
	for i := range MaxDigestKeys {
		widest.Data[fmt.Sprintf("%0*d", MaxDigestKeyBytes/MaxDigestKeys, i)] = "v"
	}
	small := retained(t, 4, func() interface{} { return reduceWith(t, bounded(fields), widest) })
	runtime.KeepAlive(widest)
	t.Logf("%d keys of %d bytes, one digest each: %.1f KiB", MaxDigestKeys, MaxDigestKeyBytes/MaxDigestKeys, small/1024)
	if widest := reduceWith(t, bounded(fields), widest); widest.Large() {
		t.Fatal("the widest per-key state is large")
	}
	if small > 32<<10 {
		t.Errorf("the widest state in per-key form costs %.1f KiB; the comment on MaxDigestKeys says about 20", small/1024)
	}
}
