package catalog

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testSums keys the checksums of these tests; any 32 bytes do.
var testSums = mustHasher(bytes.Repeat([]byte{7}, MinKeySize))

func mustHasher(key []byte) Hasher {
	h, err := NewHasher(key)
	if err != nil {
		panic(err)
	}
	return h
}

func secretWithPIN(t *testing.T, pin string) *SourceState {
	return reduce(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: pin, namespace: bank}\ndata: {pin: %s}",
		base64.StdEncoding.EncodeToString([]byte(pin))))
}

// Anyone who may read a Deployment reads its checksums annotation. A Secret
// holding a six-digit PIN has 10^6 candidates: an unkeyed checksum gives the
// PIN away by trying them all (shown on version 2 as the control), a keyed one
// matches none of them, whichever unkeyed format the attacker tries.
func TestKeyedChecksumResistsGuessing(t *testing.T) {
	secret := secretWithPIN(t, "424242")
	keyed := secret.Checksum(testSums, []string{"pin"})
	unkeyed, _ := secret.ChecksumOf(2, []string{"pin"})
	_, _, keyedSum := parseRecorded(keyed)

	var foundUnkeyed []string
	for n := 0; n < 1_000_000; n++ {
		guess := secretWithPINDigest(secret, fmt.Sprintf("%06d", n))
		for _, v := range []int{1, 2} {
			sum, _ := guess.ChecksumOf(v, []string{"pin"})
			if _, _, s := parseRecorded(sum); s == keyedSum {
				t.Fatalf("PIN %06d recovered from the keyed checksum %s (as version %d)", n, keyed, v)
			}
			if sum == unkeyed {
				foundUnkeyed = append(foundUnkeyed, fmt.Sprintf("%06d", n))
			}
		}
	}
	if strings.Join(foundUnkeyed, ",") != "424242" {
		t.Fatalf("control: the unkeyed checksum should give the PIN away, found %v", foundUnkeyed)
	}
}

// secretWithPINDigest is the Secret with another PIN, digested the way the
// reduce transform does, without re-parsing YAML a million times.
func secretWithPINDigest(like *SourceState, pin string) *SourceState {
	out := *like
	out.Digests = Digests{{"pin", digestBase64([]byte(pin))}}
	return &out
}

func TestHasherKeysAndRebaseline(t *testing.T) {
	if _, err := NewHasher(make([]byte, MinKeySize-1)); err == nil {
		t.Fatal("a short key was accepted")
	}
	other := mustHasher(bytes.Repeat([]byte{8}, MinKeySize))
	if other.KeyID() == testSums.KeyID() || len(testSums.KeyID()) != 8 {
		t.Fatalf("key IDs %q and %q", testSums.KeyID(), other.KeyID())
	}
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
	if (Hasher{}).KeyID() != "" || s.Checksum(Hasher{}, nil) != "" {
		t.Error("the zero Hasher computes checksums without a key")
	}
}

// FuzzRecordedChecksum feeds arbitrary annotation values to the checksum
// parser: never a panic; a version later than this build's (written by a
// newer release) never matches, so it counts as a change; and only the
// checksums of the data itself match it.
func FuzzRecordedChecksum(f *testing.F) {
	s := secretWithPIN(&testing.T{}, "1")
	v1, _ := s.ChecksumOf(1, nil)
	v2, _ := s.ChecksumOf(2, nil)
	for _, seed := range []string{"", "pending", v1, v2, s.Checksum(testSums, nil), "v3.:0123456789abcdef",
		"v3.0123456z:0123456789abcdef", "v99999999999999999999:0123456789abcdef", "v3.01234567:", ":", "v", "v3.01234567:0123456789abcdeF"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, recorded string) {
		v := RecordedVersion(recorded)
		if v < 0 || (v > ChecksumVersion && s.Matches(testSums, recorded, nil)) {
			t.Fatalf("RecordedVersion(%q) = %d, and it matches", recorded, v)
		}
		if s.Matches(testSums, recorded, nil) && recorded != v1 && recorded != v2 && recorded != s.Checksum(testSums, nil) {
			t.Fatalf("%q matches data it was not computed from", recorded)
		}
		_ = testSums.Rebaseline(recorded)
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
	other := mustHasher(bytes.Repeat([]byte{8}, MinKeySize))
	if reduce(cm).Change(other) == c || reduce(cm).Change(Hasher{}) != "" {
		t.Fatal("the change ID must depend on the key, and be empty without one")
	}
	if v2, _ := reduce(cm).ChecksumOf(2, nil); strings.HasSuffix(v2, c) {
		t.Fatal("the change ID is the unkeyed digest")
	}
}
