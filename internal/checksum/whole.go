package checksum

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// WholeSums is what a large source keeps of its data: every checksum that a
// read of the whole object is compared with, computed once as it enters the
// cache, and a digest of all of it for change detection.
type WholeSums struct {
	// Keys is how many keys the data holds.
	Keys int `json:"keys"`
	// Data digests every key, the field holding it and its value
	// (DataDigest): equal data, equal digest.
	Data Digest `json:"data"`
	// V1 and V3 are the whole-object checksums of each version, before
	// hex encoding; V3 is keyed with the key KeyID names, and zero when the
	// source was reduced without a key (KeyID empty).
	V1    [8]byte `json:"v1"`
	V3    [8]byte `json:"v3"`
	KeyID string  `json:"keyID,omitempty"`
}

// Sum is Hasher.Sum of the whole data; empty without a key, and when the
// sums were made under another key (or none): they cannot answer for h.
func (w *WholeSums) Sum(h Hasher) string {
	if h.key == nil || w.KeyID != h.id {
		return ""
	}
	return h.format(w.V3[:])
}

// Unkeyed is Unkeyed of the whole data.
func (w *WholeSums) Unkeyed(version int) (checksum string, ok bool) {
	if version != 1 {
		return "", false
	}
	return hex.EncodeToString(w.V1[:]), true
}

// WholeHasher computes WholeSums from a source's keys, given in sorted
// order, each once, with its field and value digest: exactly what Sum,
// Unkeyed and DataDigest write for a read of the whole object, for every
// version at once, without the keys being kept.
type WholeHasher struct {
	// v1 and v3 hash each version; data hashes what DataDigest does; v3 is
	// nil without a key.
	v1, data, v3 hash.Hash
	whole        *WholeSums
	// buf holds what is written, on the heap once rather than per key.
	buf []byte
}

// NewWholeHasher returns a WholeHasher whose version-3 sum is keyed by h
// (none for the zero Hasher).
func NewWholeHasher(h Hasher) *WholeHasher {
	w := &WholeHasher{v1: sha256.New(), data: sha256.New(), whole: &WholeSums{}, buf: make([]byte, 0, 64)}
	if h.key != nil {
		w.v3 = hmac.New(sha256.New, h.key)
		w.whole.KeyID = h.id
	}
	w.write(append(w.buf[:0], 'w'), true, true)
	return w
}

// write writes b to version 1's hash and/or to the field-aware ones.
func (w *WholeHasher) write(b []byte, v1, keyed bool) {
	if v1 {
		w.v1.Write(b)
	}
	if keyed {
		w.data.Write(b)
		if w.v3 != nil {
			w.v3.Write(b)
		}
	}
}

// Add adds the next key, in sorted order, with the field holding it and
// its value's digest.
func (w *WholeHasher) Add(key []byte, field string, d Digest) {
	w.whole.Keys++
	w.write(binary.BigEndian.AppendUint64(w.buf[:0], uint64(len(key))), true, true)
	w.write(key, true, true)
	w.write(append(w.buf[:0], d[:]...), true, false)
	keyed := InField(field, d)
	w.write(append(w.buf[:0], keyed[:]...), false, true)
}

// Sums returns the sums of the keys added.
func (w *WholeHasher) Sums() *WholeSums {
	copy(w.whole.V1[:], w.v1.Sum(w.buf[:0]))
	copy(w.whole.Data[:], w.data.Sum(w.buf[:0]))
	if w.v3 != nil {
		copy(w.whole.V3[:], w.v3.Sum(w.buf[:0]))
	}
	return w.whole
}
