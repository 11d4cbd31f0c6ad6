package catalog

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSmallSourceCost pins what the cache keeps of a small source (a
// cluster may hold 30,000 of them). The digests of its keys cost 32 bytes each; as a map
// they cost a map each, about 320 bytes for one or two keys, more than the
// rest of the state.
func TestSmallSourceCost(t *testing.T) {
	const n = 10000
	reduce := ReduceSource([]string{"data", "binaryData"})
	objs := make([]*corev1.ConfigMap, n)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: "ns", ResourceVersion: "1"},
			Data:       map[string]string{"k0": "value zero", "k1": "value one"},
		}
	}
	states := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, o := range objs {
		s, err := reduce(o)
		if err != nil {
			t.Fatal(err)
		}
		states[i] = s
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(objs)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per reduced source of two keys", per)
	if per < 2*32 {
		t.Fatalf("control: %.0f bytes measured, less than the two keys' digests: the measure is off", per)
	}
	if per > 480 {
		t.Errorf("a reduced source of two keys costs %.0f bytes, want at most 480", per)
	}
	runtime.KeepAlive(states)
}
