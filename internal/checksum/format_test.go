package checksum

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testData is Data held in a map, every key in the field "data" unless
// fields names another.
type testData struct {
	keys    []string // sorted
	digests map[string]Digest
	fields  map[string]string
}

func dataOf(values map[string]string, fields map[string]string) *testData {
	d := &testData{digests: map[string]Digest{}, fields: fields}
	for k, v := range values {
		d.keys = append(d.keys, k)
		d.digests[k] = DigestString(v)
	}
	slices.Sort(d.keys)
	return d
}

func (d *testData) Len() int                         { return len(d.keys) }
func (d *testData) At(i int) (string, Digest)        { return d.keys[i], d.digests[d.keys[i]] }
func (d *testData) Lookup(key string) (Digest, bool) { v, ok := d.digests[key]; return v, ok }
func (d *testData) Field(key string) string {
	if f, ok := d.fields[key]; ok {
		return f
	}
	return "data"
}

func mustHasher(t testing.TB, key []byte) Hasher {
	t.Helper()
	h, err := NewHasher(key)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sumOf is the part of a version-3 checksum that the key authenticates,
// without the key ID: two checksums that differ only in their IDs were
// made with the same secret.
func sumOf(t *testing.T, recorded string) string {
	t.Helper()
	v, _, sum := Parse(recorded)
	if v != Version {
		t.Fatalf("%q is not a version-%d checksum", recorded, Version)
	}
	return sum
}

// The key must decide the checksum: a Hasher that ignored its key (hashing
// under a constant, or no key at all) would let anyone who reads a workload
// test guesses of a Secret's value, while every checksum still carried a
// distinct KEYID. So the sums themselves, without their IDs, are compared:
// under two keys they differ, under the same key (another Hasher of equal
// bytes) they are equal, for whole and keyed reads and for the whole sums of
// a large source.
func TestKeyDecidesTheChecksum(t *testing.T) {
	key := bytes.Repeat([]byte{1}, MinKeySize)
	h1 := mustHasher(t, key)
	same := mustHasher(t, bytes.Clone(key))
	h2 := mustHasher(t, bytes.Repeat([]byte{2}, MinKeySize))
	key[0] = 9 // NewHasher keeps a copy: the caller's slice is not the key
	if h1.KeyID() == h2.KeyID() || h1.KeyID() != same.KeyID() {
		t.Fatalf("key IDs: %q, same key %q, other key %q", h1.KeyID(), same.KeyID(), h2.KeyID())
	}
	d := dataOf(map[string]string{"pin": "424242", "user": "alice"}, nil)
	for _, keys := range [][]string{nil, {}, {"pin"}, {"absent", "pin", "user"}} {
		s1, s2, s1again := h1.Sum(d, keys), h2.Sum(d, keys), same.Sum(d, keys)
		if sumOf(t, s1) == sumOf(t, s2) {
			t.Errorf("read %q: two keys give the same sum %s (%s, %s): the key is ignored", keys, sumOf(t, s1), s1, s2)
		}
		if s1 != s1again {
			t.Errorf("read %q: the same key gives %s and %s", keys, s1, s1again)
		}
		if unkeyed, _ := Unkeyed(2, d, keys); strings.HasSuffix(unkeyed, ":"+sumOf(t, s1)) {
			t.Errorf("read %q: the keyed sum is the unkeyed one", keys)
		}
	}
	whole := func(h Hasher) *WholeSums {
		w := NewWholeHasher(h)
		for i := range d.Len() {
			k, v := d.At(i)
			w.Add([]byte(k), d.Field(k), v)
		}
		return w.Sums()
	}
	w1, w2, w1again := whole(h1), whole(h2), whole(same)
	if w1.V3 == w2.V3 || w1.KeyID == w2.KeyID || *w1 != *w1again {
		t.Errorf("whole sums: under two keys %x (%s) and %x (%s); again under the first %x", w1.V3, w1.KeyID, w2.V3, w2.KeyID, w1again.V3)
	}
}

// Anyone who may read a Deployment reads its checksums annotation. A Secret
// holding a six-digit PIN has 10^6 candidates: an unkeyed checksum gives the
// PIN away by trying them all (shown on version 2 as the control), a keyed one
// matches none of them, whichever unkeyed format the attacker tries.
func TestKeyedChecksumResistsGuessing(t *testing.T) {
	h := mustHasher(t, bytes.Repeat([]byte{7}, MinKeySize))
	secret := func(pin string) *testData {
		return &testData{keys: []string{"pin"}, digests: map[string]Digest{"pin": DigestBase64([]byte(pin))}}
	}
	keys := []string{"pin"}
	keyed := h.Sum(secret("424242"), keys)
	unkeyed, _ := Unkeyed(2, secret("424242"), keys)
	keyedSum := sumOf(t, keyed)

	var foundUnkeyed []string
	for n := 0; n < 1_000_000; n++ {
		guess := secret(fmt.Sprintf("%06d", n))
		for _, v := range []int{1, 2} {
			sum, _ := Unkeyed(v, guess, keys)
			if _, _, s := Parse(sum); s == keyedSum {
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

func TestHasherKeysAndRebaseline(t *testing.T) {
	if _, err := NewHasher(make([]byte, MinKeySize-1)); err == nil {
		t.Fatal("a short key was accepted")
	}
	mine := mustHasher(t, bytes.Repeat([]byte{7}, MinKeySize))
	other := mustHasher(t, bytes.Repeat([]byte{8}, MinKeySize))
	if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(mine.KeyID()) {
		t.Fatalf("key ID %q: want 8 hex characters", mine.KeyID())
	}
	d := dataOf(map[string]string{"a": "1"}, nil)
	ours, theirs := mine.Sum(d, nil), other.Sum(d, nil)
	if !other.Rebaseline(ours) || !mine.Rebaseline(theirs) || mine.Rebaseline(ours) {
		t.Fatal("Rebaseline must hold exactly for checksums of another key")
	}
	v1, _ := Unkeyed(1, d, nil)
	v2, _ := Unkeyed(2, d, nil)
	for _, recorded := range []string{v1, v2, "", "pending", "v3.:0123456789abcdef"} {
		if mine.Rebaseline(recorded) {
			t.Errorf("Rebaseline(%q): only keyed checksums of another key are re-baselined", recorded)
		}
	}
	if (Hasher{}).KeyID() != "" || (Hasher{}).Sum(d, nil) != "" {
		t.Error("the zero Hasher computes checksums without a key")
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		recorded string
		version  int
		keyID    string
	}{
		{"0123456789abcdef", 1, ""},
		{"v2:0123456789abcdef", 2, ""},
		{"v3.1a2b3c4d:0123456789abcdef", 3, "1a2b3c4d"},
		{"", 0, ""},
		{"pending", 0, ""},
		{"0123456789ABCDEF", 0, ""},             // upper case is not what is written
		{"0123456789abcde", 0, ""},              // 15 hex
		{"v2.1a2b3c4d:0123456789abcdef", 0, ""}, // version 2 has no key
		{"v3:0123456789abcdef", 0, ""},          // version 3 has one
		{"v02:0123456789abcdef", 0, ""},
		{"v1:0123456789abcdef", 0, ""},
		{"v4:0123456789abcdef", 4, ""}, // a later release's: known not to match
		{"v3.1a2b3c4d:", 0, ""},
	} {
		v, keyID, sum := Parse(tc.recorded)
		if v != tc.version || keyID != tc.keyID || (v != 0) != (sum != "") || RecordedVersion(tc.recorded) != v {
			t.Errorf("Parse(%q) = %d, %q, %q; want version %d, key ID %q", tc.recorded, v, keyID, sum, tc.version, tc.keyID)
		}
	}
}

// The field holding a key is part of versions 2 and 3 (data and binaryData
// are different files for the same text), not of version 1.
func TestFieldCounts(t *testing.T) {
	h := mustHasher(t, bytes.Repeat([]byte{7}, MinKeySize))
	inData := dataOf(map[string]string{"a": "AAEC"}, nil)
	inBinary := dataOf(map[string]string{"a": "AAEC"}, map[string]string{"a": "binaryData"})
	v1a, _ := Unkeyed(1, inData, nil)
	v1b, _ := Unkeyed(1, inBinary, nil)
	v2a, _ := Unkeyed(2, inData, nil)
	v2b, _ := Unkeyed(2, inBinary, nil)
	if v1a != v1b || v2a == v2b || h.Sum(inData, nil) == h.Sum(inBinary, nil) || DataDigest(inData) == DataDigest(inBinary) {
		t.Errorf("v1 %s %s, v2 %s %s: only version 1 may ignore the field", v1a, v1b, v2a, v2b)
	}
}

// WholeHasher writes what Sum, Unkeyed and DataDigest write for a read of
// the whole object: a source may be kept in either form.
func TestWholeHasherIsTheSum(t *testing.T) {
	h := mustHasher(t, bytes.Repeat([]byte{7}, MinKeySize))
	d := dataOf(map[string]string{"a": "1", "b": "", "bin": "AAEC", "z": "last"}, map[string]string{"bin": "binaryData"})
	w := NewWholeHasher(h)
	for i := range d.Len() {
		k, v := d.At(i)
		w.Add([]byte(k), d.Field(k), v)
	}
	whole := w.Sums()
	for version := 1; version < Version; version++ {
		got, ok := whole.Unkeyed(version)
		want, _ := Unkeyed(version, d, nil)
		if !ok || got != want {
			t.Errorf("version %d: whole %q, per key %q", version, got, want)
		}
	}
	if got, want := whole.Sum(h), h.Sum(d, nil); got != want || got == "" {
		t.Errorf("version 3: whole %q, per key %q", got, want)
	}
	if whole.Data != DataDigest(d) || whole.Keys != d.Len() {
		t.Errorf("data digest %x, want %x; %d keys", whole.Data, DataDigest(d), whole.Keys)
	}
	other := mustHasher(t, bytes.Repeat([]byte{8}, MinKeySize))
	if whole.Sum(other) != "" || whole.Sum(Hasher{}) != "" {
		t.Error("whole sums answered for another key, or none")
	}
	if _, ok := whole.Unkeyed(Version); ok {
		t.Error("a keyed version was computed without a key")
	}
}
