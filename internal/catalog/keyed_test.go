package catalog

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/internal/checksum"
)

// testSums keys the checksums of these tests; any 32 bytes do.
var testSums = mustHasher(bytes.Repeat([]byte{7}, checksum.MinKeySize))

func mustHasher(key []byte) checksum.Hasher {
	h, err := checksum.NewHasher(key)
	if err != nil {
		panic(err)
	}
	return h
}

// A source state's checksums under two keys are told apart: each matches
// only its own, and the other is re-baselined (the Hasher's own tests are
// in internal/checksum).
func TestSourceChecksumsUnderTwoKeys(t *testing.T) {
	other := mustHasher(bytes.Repeat([]byte{8}, checksum.MinKeySize))
	s := reduce(t, baseConfigMap)
	mine, theirs := s.Checksum(testSums, nil), s.Checksum(other, nil)
	if mine == theirs {
		t.Fatal("two keys give the same checksum")
	}
	if s.Matches(testSums, theirs, nil) || !s.Matches(testSums, mine, nil) {
		t.Fatal("a checksum of another key matched, or one of this key did not")
	}
	if !testSums.Rebaseline(theirs) || testSums.Rebaseline(mine) {
		t.Fatal("Rebaseline must hold exactly for checksums of another key")
	}
	v1, _ := s.ChecksumOf(1, nil)
	for _, recorded := range []string{v1, "", "pending", "v2:0123456789abcdef"} {
		if testSums.Rebaseline(recorded) {
			t.Errorf("Rebaseline(%q): only keyed checksums of another key are re-baselined", recorded)
		}
	}
	if (checksum.Hasher{}).KeyID() != "" || s.Checksum(checksum.Hasher{}, nil) != "" {
		t.Error("the zero Hasher computes checksums without a key")
	}
}

// FuzzRecordedChecksum feeds arbitrary annotation values to the checksum
// parser: never a panic; a value of a version this build does not know
// (written by a newer release, or "v2:", which none wrote) never matches, so
// it counts as a change; and only the checksums of the data itself match it.
func FuzzRecordedChecksum(f *testing.F) {
	s := reduce(&testing.T{}, "apiVersion: v1\nkind: Secret\nmetadata: {name: pin, namespace: bank}\ndata: {pin: MQ==}")
	v1, _ := s.ChecksumOf(1, nil)
	for _, seed := range []string{"", "pending", v1, "v2:" + v1, s.Checksum(testSums, nil), "v3.:0123456789abcdef",
		"v3.0123456z:0123456789abcdef", "v99999999999999999999:0123456789abcdef", "v3.01234567:", ":", "v", "v3.01234567:0123456789abcdeF"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, recorded string) {
		v, _, _ := checksum.Parse(recorded)
		if (v != 0 && v != 1 && v != checksum.Version) || (v == 0 && s.Matches(testSums, recorded, nil)) {
			t.Fatalf("Parse(%q) gives version %d, and it matches", recorded, v)
		}
		if s.Matches(testSums, recorded, nil) && recorded != v1 && recorded != s.Checksum(testSums, nil) {
			t.Fatalf("%q matches data it was not computed from", recorded)
		}
		// Only a keyed checksum of another key is re-baselined, and it
		// never matches.
		if testSums.Rebaseline(recorded) && (v != 3 || s.Matches(testSums, recorded, nil)) {
			t.Fatalf("%q (version %d) is re-baselined", recorded, v)
		}
	})
}

// A change is named by the keyed digest of all the data: the same for every
// reader and across metadata updates, different under another key, nothing
// without one.
func TestChangeIsKeyed(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop"}, Data: map[string]string{"a": "1", "b": "2"}}
	relabelled := cm.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	changed := cm.DeepCopy()
	changed.Data["b"] = "3"
	reduce := func(o *corev1.ConfigMap) *SourceState {
		out, err := ReduceSource([]string{"data"})(o)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*SourceState)
	}
	c := reduce(cm).Change(testSums)
	if len(c) != 16 || c != reduce(relabelled).Change(testSums) || c == reduce(changed).Change(testSums) {
		t.Fatalf("change %q, relabelled %q, changed %q", c, reduce(relabelled).Change(testSums), reduce(changed).Change(testSums))
	}
	other := mustHasher(bytes.Repeat([]byte{8}, checksum.MinKeySize))
	if reduce(cm).Change(other) == c || reduce(cm).Change(checksum.Hasher{}) != "" {
		t.Fatal("the change ID must depend on the key, and be empty without one")
	}
	if d := checksum.DataDigest(reduce(cm).data()); strings.HasPrefix(hex.EncodeToString(d[:]), c) {
		t.Fatal("the change ID is the unkeyed digest")
	}
}
