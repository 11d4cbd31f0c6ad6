package catalog

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/checksum"
)

var configDataFields = []string{"data", "binaryData"}

const baseConfigMap = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: shop
  uid: 0b8e2f2c-0000-4000-8000-000000000001
  resourceVersion: "7"
  labels: {team: payments}
  annotations: {note: first}
data:
  a: alpha
  b: beta
binaryData:
  bin: AAEC
`

func reduce(t *testing.T, yamlText string) *SourceState {
	t.Helper()
	out, err := ReduceSource(configDataFields)(fromYAML(t, yamlText))
	if err != nil {
		t.Fatal(err)
	}
	state, ok := out.(*SourceState)
	if !ok {
		t.Fatalf("ReduceSource returned %T, want *SourceState", out)
	}
	return state
}

func TestReduceConfigKeepsIdentityAndOneDigestPerKey(t *testing.T) {
	s := reduce(t, baseConfigMap)
	if s.Name != "app" || s.Namespace != "shop" || s.GroupVersionKind() != (schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}) ||
		s.ResourceVersion != "7" || s.UID != "" {
		t.Errorf("identity not kept: %+v", s.Meta)
	}
	if len(s.GetLabels()) != 0 || len(s.Annotations) != 0 {
		t.Errorf("labels/annotations kept in the cache: %v %v", s.GetLabels(), s.Annotations)
	}
	if got := s.Digests.Keys(); !reflect.DeepEqual(got, []string{"a", "b", "bin"}) {
		t.Errorf("digest keys = %v, want [a b bin]", got)
	}
	a, _ := s.Digests.Get("a")
	if b, _ := s.Digests.Get("b"); a == b {
		t.Error("different values share a digest")
	}
}

func TestReduceConfigSameData(t *testing.T) {
	base := reduce(t, baseConfigMap)
	cases := []struct {
		name string
		yaml string
		same bool
	}{
		{"identical", baseConfigMap, true},
		{"labels, annotations and resourceVersion changed", `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: shop
  resourceVersion: "8"
  labels: {team: search, extra: x}
  annotations: {note: second}
data: {b: beta, a: alpha}
binaryData: {bin: AAEC}
`, true},
		{"data value changed", `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {a: ALPHA, b: beta}
binaryData: {bin: AAEC}
`, false},
		{"binaryData value changed", `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {a: alpha, b: beta}
binaryData: {bin: AAED}
`, false},
		{"key added", `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {a: alpha, b: beta, c: gamma}
binaryData: {bin: AAEC}
`, false},
		{"key removed", `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {a: alpha}
binaryData: {bin: AAEC}
`, false},
		{"key renamed, same value", `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {a: alpha, bb: beta}
binaryData: {bin: AAEC}
`, false},
		{"value emptied", `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {a: alpha, b: ""}
binaryData: {bin: AAEC}
`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other := reduce(t, tc.yaml)
			if got := base.SameData(other); got != tc.same {
				t.Errorf("base.SameData = %v, want %v", got, tc.same)
			}
			if got := other.SameData(base); got != tc.same {
				t.Errorf("SameData is not symmetric: other.SameData = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestReduceConfigIgnoresFieldsNotConfigured(t *testing.T) {
	// A Secret kind configured with dataFields [data] only: stringData and
	// type are not data the pods read through this source kind.
	secretA := fromYAML(t, `
apiVersion: v1
kind: Secret
metadata: {name: s, namespace: shop}
type: Opaque
data: {pw: c2VjcmV0}
stringData: {other: x}
`)
	secretB := fromYAML(t, `
apiVersion: v1
kind: Secret
metadata: {name: s, namespace: shop}
type: kubernetes.io/tls
data: {pw: c2VjcmV0}
`)
	transform := ReduceSource([]string{"data"})
	a, _ := transform(secretA)
	b, _ := transform(secretB)
	if !a.(*SourceState).SameData(b.(*SourceState)) {
		t.Error("fields outside dataFields changed the data")
	}
}

func TestReduceConfigNonStringValues(t *testing.T) {
	// Source kinds declared by configuration may hold any JSON under their data fields.
	mk := func(spec string) *SourceState {
		out, err := ReduceSource([]string{"spec"})(fromYAML(t, "apiVersion: example.com/v1\nkind: Settings\nmetadata: {name: s, namespace: shop}\nspec: "+spec))
		if err != nil {
			t.Fatal(err)
		}
		return out.(*SourceState)
	}
	a := mk("{n: 5, m: {x: 1, y: [1, 2]}}")
	b := mk("{m: {y: [1, 2], x: 1}, n: 5}")
	c := mk("{n: 6, m: {x: 1, y: [1, 2]}}")
	d := mk("{n: 5, m: {x: 1, y: [2, 1]}}")
	if !a.SameData(b) {
		t.Error("map key order changed the digest")
	}
	if a.SameData(c) || a.SameData(d) {
		t.Error("a changed non-string value kept the digest")
	}
	// A data field of the wrong type holds no keys, and does not panic.
	if e := mk("just a string"); len(e.Digests) != 0 {
		t.Errorf("digests of a non-map data field: %v", e.Digests)
	}
}

func TestReduceConfigPassesThrough(t *testing.T) {
	transform := ReduceSource(configDataFields)
	reduced := reduce(t, baseConfigMap)
	tombstone := cache.DeletedFinalStateUnknown{Key: "shop/app", Obj: reduced}
	cases := []struct {
		name string
		obj  interface{}
	}{
		{"already reduced", reduced},
		{"tombstone", tombstone},
		{"tombstone of an unreduced object", cache.DeletedFinalStateUnknown{Key: "shop/app", Obj: fromYAML(t, baseConfigMap)}},
		{"nil", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := transform(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out, tc.obj) {
				t.Errorf("transform changed the object: %#v", out)
			}
		})
	}
	// The very same pointer, not a copy.
	if out, _ := transform(reduced); out != interface{}(reduced) {
		t.Error("already reduced object was replaced")
	}
}

func TestChecksum(t *testing.T) {
	const cm = `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {a: alpha, b: beta}
`
	base := reduce(t, cm)
	bChanged := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: alpha, b: BETA}")
	aChanged := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: ALPHA, b: beta}")
	cAdded := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: alpha, b: beta, c: gamma}")
	cEmpty := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: alpha, b: beta, c: ''}")
	relabelled := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop, labels: {x: y}}\ndata: {b: beta, a: alpha}")

	cases := []struct {
		name   string
		before *SourceState
		after  *SourceState
		keys   []string
		same   bool
	}{
		{"unread key changed, keyed reference", base, bChanged, []string{"a"}, true},
		{"read key changed, keyed reference", base, aChanged, []string{"a"}, false},
		{"unread key changed, whole-object reference", base, bChanged, nil, false},
		{"metadata changed, whole-object reference", base, relabelled, nil, true},
		{"metadata changed, keyed reference", base, relabelled, []string{"a", "b"}, true},
		{"unread key added, keyed reference", base, cAdded, []string{"a", "b"}, true},
		{"key added, whole-object reference", base, cAdded, nil, false},
		{"read key appears", base, cAdded, []string{"a", "c"}, false},
		{"absent key becomes present but empty", base, cEmpty, []string{"c"}, false},
		{"absent key stays absent", base, bChanged, []string{"c"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, a := tc.before.Checksum(testSums, tc.keys), tc.after.Checksum(testSums, tc.keys)
			if (a == b) != tc.same {
				t.Errorf("checksum before %s, after %s: same = %v, want %v", b, a, a == b, tc.same)
			}
		})
	}

	v3hex16 := regexp.MustCompile(`^v3\.` + testSums.KeyID() + `:[0-9a-f]{16}$`)
	for _, keys := range [][]string{nil, {}, {"a"}, {"missing"}} {
		if sum := base.Checksum(testSums, keys); !v3hex16.MatchString(sum) {
			t.Errorf("Checksum(%q) = %q, want v3.KEYID: and 16 hex characters", keys, sum)
		}
	}
	distinct := map[string][]string{}
	for _, keys := range [][]string{nil, {}, {"a"}, {"b"}, {"a", "b"}, {"ab"}, {"c"}, {"a", "c"}} {
		sum := base.Checksum(testSums, keys)
		if prev, dup := distinct[sum]; dup {
			t.Errorf("Checksum(%q) == Checksum(%q) = %s", keys, prev, sum)
		}
		distinct[sum] = keys
	}
	// Keyed references reach Checksum with sorted keys, so the same set of keys
	// gives the same checksum whatever order the pod spec names them in.
	if base.Checksum(testSums, []string{"a", "b"}) != relabelled.Checksum(testSums, []string{"a", "b"}) {
		t.Error("same keys, same data, different checksums")
	}
	if base.Checksum(testSums, nil) != base.Checksum(testSums, nil) {
		t.Error("Checksum is not deterministic")
	}
}

func TestSourceStateDeepCopy(t *testing.T) {
	s := reduce(t, baseConfigMap)
	c := s.DeepCopyObject().(*SourceState)
	if !reflect.DeepEqual(s, c) {
		t.Fatalf("copy differs: %+v", c)
	}
	c.Digests[0] = checksum.KeyDigest{Key: "a", Digest: checksum.Digest{}}
	c.Name = "other"
	c.Fields["bin"] = "data"
	if a, _ := s.Digests.Get("a"); a == (checksum.Digest{}) || s.Name != "app" || s.Fields["bin"] != "binaryData" {
		t.Error("copy shares state with the original")
	}
}

// Checksums are versioned. Version 1 (16 hex characters) is what the first
// releases recorded, and must stay computable exactly, so that their
// workloads are re-recorded without a restart: these values were computed by
// that release's code.
func TestChecksumVersions(t *testing.T) {
	s := reduce(t, baseConfigMap)
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, "3b73330b386dab84"},
		{[]string{"a", "missing"}, "36adfbd08bf4880b"},
	} {
		got, ok := s.ChecksumOf(1, tc.keys)
		if !ok || got != tc.want {
			t.Errorf("ChecksumOf(1, %q) = %q, %v; want %q as the previous release computed", tc.keys, got, ok, tc.want)
		}
		if !s.Matches(testSums, tc.want, tc.keys) {
			t.Errorf("version-1 checksum %s does not match the data it was computed from", tc.want)
		}
		current := s.Checksum(testSums, tc.keys)
		if !regexp.MustCompile(`^v3\.[0-9a-f]{8}:[0-9a-f]{16}$`).MatchString(current) || !s.Matches(testSums, current, tc.keys) {
			t.Errorf("Checksum(%q) = %q: not a matching version-3 checksum", tc.keys, current)
		}
	}
	for _, version := range []int{2, 3} {
		if sum, ok := s.ChecksumOf(version, nil); ok {
			t.Errorf("version %d computed without a key: %q", version, sum)
		}
	}
	other := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: ALPHA, b: beta}\nbinaryData: {bin: AAEC}")
	for _, recorded := range []string{"3b73330b386dab84", s.Checksum(testSums, nil)} {
		if other.Matches(testSums, recorded, nil) {
			t.Errorf("changed data matches %s", recorded)
		}
	}

	for _, tc := range []struct {
		recorded string
		version  int
	}{
		{"3b73330b386dab84", 1},
		{"v2:3b73330b386dab84", 0},          // no release wrote version 2
		{"v3.01234567:3b73330b386dab84", 3}, // another key: known as a format, not comparable
		{"v3:3b73330b386dab84", 0}, {"v2.01234567:3b73330b386dab84", 0},
		{"", 0}, {"pending", 0}, {"3B73330B386DAB84", 0}, {"3b73330b386dab8", 0}, {"v2:3b73330b386dab8", 0},
		{"v1:3b73330b386dab84", 0}, {"v02:3b73330b386dab84", 0}, {"v2:3b73330b386dab84 ", 0}, {"vx:3b73330b386dab84", 0},
	} {
		if got, _, _ := checksum.Parse(tc.recorded); got != tc.version {
			t.Errorf("Parse(%q) gives version %d, want %d", tc.recorded, got, tc.version)
		}
		if tc.version != 1 && s.Matches(testSums, tc.recorded, nil) {
			t.Errorf("%q matches", tc.recorded)
		}
	}
}

// The file a pod sees depends on the field holding a key: "AAEC" in data is
// four characters, in binaryData the bytes 00 01 02. Version 3 tells them
// apart; version 1 could not.
func TestChecksumTellsDataFromBinaryData(t *testing.T) {
	inData := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {k: AAEC, other: x}")
	inBinary := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {other: x}\nbinaryData: {k: AAEC}")
	if inData.SameData(inBinary) || inBinary.SameData(inData) {
		t.Error("moving a key from data to binaryData is not a data change")
	}
	for _, keys := range [][]string{nil, {"k"}} {
		if inData.Checksum(testSums, keys) == inBinary.Checksum(testSums, keys) {
			t.Errorf("Checksum(%q) is the same in data and in binaryData", keys)
		}
		v1Data, _ := inData.ChecksumOf(1, keys)
		v1Binary, _ := inBinary.ChecksumOf(1, keys)
		if v1Data != v1Binary {
			t.Errorf("version 1 told the fields apart: it must stay what the previous release computed")
		}
	}
	// Keys not moved keep their checksum.
	if inData.Checksum(testSums, []string{"other"}) != inBinary.Checksum(testSums, []string{"other"}) {
		t.Error("a key that stayed in data changed its checksum")
	}
	if inData.Fields != nil {
		t.Errorf("keys all in data, yet Fields = %v: the common case must cost no map", inData.Fields)
	}
	if inBinary.Fields["k"] != "binaryData" || len(inBinary.Fields) != 1 {
		t.Errorf("Fields = %v", inBinary.Fields)
	}
	// Moving back restores the checksum.
	back := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop, resourceVersion: '9'}\ndata: {k: AAEC, other: x}")
	if !back.SameData(inData) || back.Checksum(testSums, nil) != inData.Checksum(testSums, nil) {
		t.Error("moving the key back does not restore the data")
	}
}

func TestChangedKeys(t *testing.T) {
	before := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: '1', b: '1', gone: x}\nbinaryData: {bin: AAEC}")
	after := reduce(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {a: '2', b: '1', new: y, bin: AAEC}")
	if got := strings.Join(after.ChangedKeys(before), ","); got != "a,bin,gone,new" {
		t.Fatalf("ChangedKeys = %q, want a,bin,gone,new (bin moved from binaryData to data)", got)
	}
}
