package checksum

import (
	"reflect"
	"testing"
)

func TestDigestsBuilderSortsAndKeepsTheLastOfAKey(t *testing.T) {
	var b DigestsBuilder
	b.Set("b", Digest{1})
	b.Set("a", Digest{2})
	b.Set("b", Digest{3}) // the same key in a later field
	b.Set("c", Digest{4})
	got := b.Done()
	want := Digests{{"a", Digest{2}}, {"b", Digest{3}}, {"c", Digest{4}}}
	if !reflect.DeepEqual(got, want) || cap(got) != len(got) {
		t.Fatalf("done() = %v (cap %d), want %v", got, cap(got), want)
	}
	if d, ok := got.Get("b"); !ok || d != (Digest{3}) {
		t.Errorf("Get(b) = %v, %v", d, ok)
	}
	if _, ok := got.Get("bb"); ok {
		t.Error("Get of a missing key found one")
	}
	var empty DigestsBuilder
	if e := empty.Done(); e == nil || len(e) != 0 {
		t.Errorf("no keys: %#v, want empty and not nil", e)
	}
	m := map[string]Digest{"a": {2}, "b": {3}, "c": {4}}
	if !reflect.DeepEqual(DigestsOf(m), want) || DigestsOf(nil) != nil {
		t.Error("DigestsOf does not sort a map's digests")
	}
}
