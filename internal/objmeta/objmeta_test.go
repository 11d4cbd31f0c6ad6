package objmeta

import (
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The caches and the reflector read an object's metadata through
// meta.Accessor: what Meta keeps reads back, what it does not reads as
// empty, and a copy's annotations are its own.
func TestMetaIsAnObject(t *testing.T) {
	m := &Meta{Name: "app", Namespace: "shop", UID: "u-1", ResourceVersion: "7", Annotations: map[string]string{"a": "b"}}
	acc, err := meta.Accessor(m)
	if err != nil {
		t.Fatal(err)
	}
	if acc.GetName() != "app" || acc.GetNamespace() != "shop" || acc.GetUID() != "u-1" || acc.GetResourceVersion() != "7" || acc.GetAnnotations()["a"] != "b" {
		t.Fatalf("read back %+v", acc)
	}
	acc.SetLabels(map[string]string{"x": "y"})
	acc.SetGeneration(3)
	if acc.GetLabels() != nil || acc.GetGeneration() != 0 || acc.GetDeletionTimestamp() != nil {
		t.Error("a field Meta does not keep reads as set")
	}
	var c Meta
	m.DeepCopyInto(&c)
	c.Annotations["a"] = "changed"
	if m.Annotations["a"] != "b" {
		t.Error("the copy shares its annotations")
	}
	var empty Meta
	empty.DeepCopyInto(&c)
	if c.Annotations != nil {
		t.Error("nil annotations copied as empty")
	}
}

// A Type reads back what was set, empty when nothing was, and objects of
// one kind share one copy of its names.
func TestType(t *testing.T) {
	var zero Type
	if !zero.GroupVersionKind().Empty() {
		t.Error("a zero Type has a kind")
	}
	a, b := TypeOf("apps/v1", "Deployment"), TypeOf("apps/"+"v1", "Deploy"+"ment")
	want := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	if a.GroupVersionKind() != want || a != b {
		t.Fatalf("%v, %v", a.GroupVersionKind(), b.GroupVersionKind())
	}
	a.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	if !a.GroupVersionKind().Empty() || b.GroupVersionKind() != want {
		t.Error("clearing one Type changed it wrongly or changed another")
	}
	x, y := Intern("sho"+"p"), Intern("s"+"hop")
	if x != "shop" || unsafe.StringData(x) != unsafe.StringData(y) {
		t.Error("two copies of one string")
	}
}
