package catalog

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Source kinds client-go knows arrive typed (protobuf), others unstructured
// (JSON). Applied checksums are persisted on workloads, so the two must give
// the very same digests, or switching transports would restart everything.
func TestTypedAndUnstructuredDigestsAgree(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "app", Namespace: "shop", ResourceVersion: "7", Labels: map[string]string{"x": "y"}}
	objects := []struct {
		name    string
		obj     runtime.Object
		fields  []string
		fields2 map[string]string // keys outside "data"
	}{
		{"configmap", &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta,
			Data:       map[string]string{"text": "hello \"world\"\n", "empty": "", "unicode": "grüße ✓"},
			BinaryData: map[string][]byte{"bin": {0, 1, 2, 255, 254}, "none": {}},
		}, []string{"data", "binaryData"}, map[string]string{"bin": "binaryData", "none": "binaryData"}},
		{"secret", &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta,
			Data:       map[string][]byte{"password": []byte("s3cr3t"), "cert": {0x30, 0x82, 0x01}},
		}, []string{"data"}, nil},
	}
	for _, o := range objects {
		t.Run(o.name, func(t *testing.T) {
			raw, err := json.Marshal(o.obj)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal(raw, &u.Object); err != nil {
				t.Fatal(err)
			}
			reduce := ReduceSource(o.fields)
			typed, err := reduce(o.obj)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := reduce(u)
			if err != nil {
				t.Fatal(err)
			}
			a, b := typed.(*SourceState), fromJSON.(*SourceState)
			if len(a.Digests) == 0 || !reflect.DeepEqual(a.Digests, b.Digests) {
				t.Fatalf("digests differ:\n typed %v\n  json %v", a.Digests, b.Digests)
			}
			if !reflect.DeepEqual(a.Fields, b.Fields) || !reflect.DeepEqual(a.Fields, o.fields2) {
				t.Fatalf("fields differ:\n typed %v\n  json %v\n  want %v", a.Fields, b.Fields, o.fields2)
			}
			for _, version := range []int{1} { // the unkeyed versions; the keyed one below
				for _, keys := range [][]string{nil, {"bin", "text", "password"}} {
					x, _ := a.ChecksumOf(version, keys)
					y, _ := b.ChecksumOf(version, keys)
					if x != y {
						t.Fatalf("version %d checksums of %q differ: typed %s, json %s", version, keys, x, y)
					}
				}
			}
			if a.Name != "app" || a.Namespace != "shop" || a.ResourceVersion != "7" {
				t.Fatalf("identity lost: %+v", a.Meta)
			}
			if a.Checksum(testSums, nil) != b.Checksum(testSums, nil) {
				t.Fatal("checksums differ")
			}
		})
	}
}
