package checksum

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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
		if unkeyed := unkeyedFieldSum(d, keys); unkeyed == sumOf(t, s1) {
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
// PIN away by trying them all (shown on version 1, and on version 3's input
// unkeyed, as the controls), a keyed one matches none of them, whichever
// unkeyed form the attacker tries.
func TestKeyedChecksumResistsGuessing(t *testing.T) {
	h := mustHasher(t, bytes.Repeat([]byte{7}, MinKeySize))
	secret := func(pin string) *testData {
		return &testData{keys: []string{"pin"}, digests: map[string]Digest{"pin": DigestBase64([]byte(pin))}}
	}
	keys := []string{"pin"}
	keyed := h.Sum(secret("424242"), keys)
	unkeyed := map[string]func(d Data) string{
		"version 1":                  func(d Data) string { s, _ := Unkeyed(1, d, keys); return s },
		"version 3's input, unkeyed": func(d Data) string { return unkeyedFieldSum(d, keys) },
	}
	target := map[string]string{}
	for form, f := range unkeyed {
		target[form] = f(secret("424242"))
	}
	keyedSum := sumOf(t, keyed)

	found := map[string][]string{}
	for n := 0; n < 1_000_000; n++ {
		guess := secret(fmt.Sprintf("%06d", n))
		for form, f := range unkeyed {
			sum := f(guess)
			if sum == keyedSum {
				t.Fatalf("PIN %06d recovered from the keyed checksum %s (as %s)", n, keyed, form)
			}
			if sum == target[form] {
				found[form] = append(found[form], fmt.Sprintf("%06d", n))
			}
		}
	}
	for form := range unkeyed {
		if strings.Join(found[form], ",") != "424242" {
			t.Fatalf("control: the %s checksum should give the PIN away, found %v", form, found[form])
		}
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
	for _, recorded := range []string{v1, "v2:" + unkeyedFieldSum(d, nil), "", "pending", "v3.:0123456789abcdef"} {
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
		{"v2:0123456789abcdef", 0, ""}, // never released: not a checksum
		{"v3.1a2b3c4d:0123456789abcdef", 3, "1a2b3c4d"},
		{"", 0, ""},
		{"pending", 0, ""},
		{"0123456789ABCDEF", 0, ""}, // upper case is not what is written
		{"0123456789abcde", 0, ""},  // 15 hex
		{"v2.1a2b3c4d:0123456789abcdef", 0, ""},
		{"v3:0123456789abcdef", 0, ""}, // version 3 has one
		{"v02:0123456789abcdef", 0, ""},
		{"v1:0123456789abcdef", 0, ""},
		{"v4:0123456789abcdef", 0, ""},          // a later release's: cannot be compared
		{"v4.1a2b3c4d:0123456789abcdef", 0, ""}, // likewise
		{"v3.1a2b3c4d:", 0, ""},
	} {
		v, keyID, sum := Parse(tc.recorded)
		if v != tc.version || keyID != tc.keyID || (v != 0) != (sum != "") {
			t.Errorf("Parse(%q) = %d, %q, %q; want version %d, key ID %q", tc.recorded, v, keyID, sum, tc.version, tc.keyID)
		}
	}
}

// The field holding a key is part of version 3 (data and binaryData are
// different files for the same text), not of version 1.
func TestFieldCounts(t *testing.T) {
	h := mustHasher(t, bytes.Repeat([]byte{7}, MinKeySize))
	inData := dataOf(map[string]string{"a": "AAEC"}, nil)
	inBinary := dataOf(map[string]string{"a": "AAEC"}, map[string]string{"a": "binaryData"})
	v1a, _ := Unkeyed(1, inData, nil)
	v1b, _ := Unkeyed(1, inBinary, nil)
	if v1a != v1b || h.Sum(inData, nil) == h.Sum(inBinary, nil) || DataDigest(inData) == DataDigest(inBinary) {
		t.Errorf("v1 %s %s: only version 1 may ignore the field", v1a, v1b)
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
	if got, ok := whole.Unkeyed(1); !ok || got != mustUnkeyed(t, 1, d) {
		t.Errorf("version 1: whole %q, per key %q", got, mustUnkeyed(t, 1, d))
	}
	for _, version := range []int{0, 2, Version} {
		if sum, ok := whole.Unkeyed(version); ok {
			t.Errorf("version %d computed unkeyed by the whole sums: %q", version, sum)
		}
		if sum, ok := Unkeyed(version, d, nil); ok {
			t.Errorf("version %d computed unkeyed: %q", version, sum)
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
}

// unkeyedFieldSum is version 3's input hashed without a key: what an
// attacker who knows the format, but not the key, can compute.
func unkeyedFieldSum(d Data, keys []string) string {
	return hex.EncodeToString(sum(d, keys, fieldDigest(d), sha256.New)[:8])
}

func mustUnkeyed(t *testing.T, version int, d Data) string {
	t.Helper()
	s, ok := Unkeyed(version, d, nil)
	if !ok {
		t.Fatalf("version %d unknown", version)
	}
	return s
}
