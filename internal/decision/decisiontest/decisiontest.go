// Package decisiontest holds the fixtures that the decision's tests and the
// controller's tests share: source states reduced as the informer reduces
// them, lookups over maps, and checksum keys.
package decisiontest

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
)

// SourceState reduces a source object holding data, as the informer does.
func SourceState(t testing.TB, id catalog.SourceID, data map[string]string) *catalog.SourceState {
	t.Helper()
	return SourceStateIn(t, id, data, nil)
}

// V1 is a state's checksum in the format of version 1.
func V1(s *catalog.SourceState, keys []string) string {
	sum, ok := s.ChecksumOf(1, keys)
	if !ok {
		panic("version 1 unknown")
	}
	return sum
}

// SourceStateIn reduces a ConfigMap holding data and binaryData (base64 text).
func SourceStateIn(t testing.TB, id catalog.SourceID, data, binaryData map[string]string) *catalog.SourceState {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(id.Namespace)
	u.SetName(id.Name)
	if err := unstructured.SetNestedStringMap(u.Object, data, "data"); err != nil {
		t.Fatal(err)
	}
	if binaryData != nil {
		if err := unstructured.SetNestedStringMap(u.Object, binaryData, "binaryData"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := catalog.ReduceSource([]string{"data", "binaryData"})(u)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*catalog.SourceState)
}

// Annotation encodes an applied-checksums annotation.
func Annotation(t testing.TB, m map[string]string) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Sums keys the checksums of tests; any 32 bytes do.
var Sums = mustHasher("restart-controller tests' checksum key, 32+ bytes")

// OtherKey stands for a key that replaced the one a checksum was made with.
var OtherKey = mustHasher("another key, replaced since: 32 bytes or more")

func mustHasher(key string) checksum.Hasher {
	h, err := checksum.NewHasher([]byte(key))
	if err != nil {
		panic(err)
	}
	return h
}
