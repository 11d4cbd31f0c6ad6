package catalog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
)

// A source's per-key digests cost memory per key: about 80 bytes of map
// entry, digest and short name (TestLargeSourceCostDoesNotGrowWithKeys
// measures it).
// Keys cost a tenant almost nothing to create: a valid 1 MB ConfigMap holds
// 80,000 empty keys, 6 MiB of digests, and one able to create ConfigMaps
// anywhere could make the controller run out of memory (issue 9). So a
// source keeps one digest per key only within these bounds; a larger one
// keeps the checksums of its whole data instead (WholeSums), a few hundred
// bytes whatever its keys, and the keys that workloads read of it are read
// when a decision needs them (KeyReader).
//
// The bounds are far above what configuration usually holds (a handful to
// a few dozen keys; the benchmark's sources have 10), so keyed reads of
// ordinary sources never call the API server, while the most a source in
// per-key form can cost, about 20 KiB, is that of a few cached workloads.
const (
	// MaxDigestKeys is the most keys a source keeps one digest each for.
	MaxDigestKeys = 256
	// MaxDigestKeyBytes bounds the length of those keys' names, together.
	MaxDigestKeyBytes = 8 << 10
)

// WholeSums is what a large source keeps of its data: every checksum that a
// read of the whole object is compared with, computed once as it enters the
// cache, and a digest of all of it for change detection.
type WholeSums struct {
	// Keys is how many keys the data holds.
	Keys int `json:"keys"`
	// Data digests every key, the field holding it and its value (the
	// first half of version 2's hash): equal data, equal digest.
	Data Digest `json:"data"`
	// V1, V2 and V3 are the whole-object checksums of each version, before
	// hex encoding; V3 is keyed with the key KeyID names, and zero when the
	// source was reduced without a key (KeyID empty).
	V1    [8]byte `json:"v1"`
	V2    [8]byte `json:"v2"`
	V3    [8]byte `json:"v3"`
	KeyID string  `json:"keyID,omitempty"`
}

// tooManyKeys reports whether the fields hold more keys, or longer key
// names, than a source keeps one digest each for. A key held by two fields
// counts twice: the bound errs on the side of memory.
func tooManyKeys(fields []dataField) bool {
	n, nameBytes := 0, 0
	for _, f := range fields {
		if n += f.len; n > MaxDigestKeys {
			return true
		}
	}
	for _, f := range fields {
		for key := range f.keys {
			if nameBytes += len(key); nameBytes > MaxDigestKeyBytes {
				return true
			}
		}
	}
	return false
}

// wholeSums computes the whole-object checksums of the fields' data in one
// pass over its keys in sorted order, the order checksum uses, and returns
// as well the digests (and fields outside "data") of the wanted keys, which
// must be sorted. The only memory it keeps while it runs is the list of key
// names; each value is hashed once, where the decoded object holds it.
func wholeSums(fields []dataField, sums Hasher, wanted []string) (*WholeSums, map[string]Digest, map[string]string) {
	n := 0
	for _, f := range fields {
		n += f.len
	}
	keys := make([]string, 0, n)
	for _, f := range fields {
		keys = slices.AppendSeq(keys, f.keys)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // a key in two fields
	w := newWholeHasher(sums, wanted)
	for _, key := range keys {
		// The later field in the order of dataFields holds a key that is
		// in two, as SourceState.set keeps it.
		for i := len(fields) - 1; i >= 0; i-- {
			if d, ok := fields[i].digest(key); ok {
				w.add(bytesOf(key), fields[i].name, d)
				break
			}
		}
	}
	return w.finish()
}

// wholeHasher computes WholeSums from a source's keys, given in sorted
// order, each once, with its field and value digest: exactly what
// SourceState.sum writes for a read of the whole object, for every version
// at once. It keeps the digests of the wanted keys (sorted) on the way.
type wholeHasher struct {
	v1, v2, v3 hash.Hash // v3 nil without a key
	whole      *WholeSums
	wanted     []string
	digests    map[string]Digest
	fields     map[string]string
	// buf holds what is written, on the heap once rather than per key.
	buf []byte
}

func newWholeHasher(sums Hasher, wanted []string) *wholeHasher {
	w := &wholeHasher{v1: sha256.New(), v2: sha256.New(), whole: &WholeSums{}, wanted: wanted,
		digests: map[string]Digest{}, buf: make([]byte, 0, 64)}
	if sums.key != nil {
		w.v3 = hmac.New(sha256.New, sums.key)
		w.whole.KeyID = sums.id
	}
	w.write(append(w.buf[:0], 'w'), true, true)
	return w
}

// write writes b to version 1's hash and/or to the field-aware ones.
func (w *wholeHasher) write(b []byte, v1, keyed bool) {
	if v1 {
		w.v1.Write(b)
	}
	if keyed {
		w.v2.Write(b)
		if w.v3 != nil {
			w.v3.Write(b)
		}
	}
}

func (w *wholeHasher) add(key []byte, field string, d Digest) {
	w.whole.Keys++
	w.write(binary.BigEndian.AppendUint64(w.buf[:0], uint64(len(key))), true, true)
	w.write(key, true, true)
	w.write(append(w.buf[:0], d[:]...), true, false)
	keyed := inField(field, d)
	w.write(append(w.buf[:0], keyed[:]...), false, true)
	for len(w.wanted) > 0 && w.wanted[0] < string(key) {
		w.wanted = w.wanted[1:]
	}
	if len(w.wanted) > 0 && w.wanted[0] == string(key) {
		w.digests[w.wanted[0]] = d
		if field != defaultField {
			if w.fields == nil {
				w.fields = map[string]string{}
			}
			w.fields[w.wanted[0]] = field
		}
	}
}

func (w *wholeHasher) finish() (*WholeSums, map[string]Digest, map[string]string) {
	copy(w.whole.V1[:], w.v1.Sum(w.buf[:0]))
	sum2 := w.v2.Sum(w.buf[:0])
	copy(w.whole.V2[:], sum2)
	copy(w.whole.Data[:], sum2)
	if w.v3 != nil {
		copy(w.whole.V3[:], w.v3.Sum(w.buf[:0]))
	}
	return w.whole, w.digests, w.fields
}

// Large reports whether the state keeps the checksums of its whole data
// instead of one digest per key.
func (c *SourceState) Large() bool { return c.Whole != nil }

// Covers reports whether the state answers a read of keys (nil: the whole
// object). A state with one digest per key answers every read; a large
// source's, reads of the whole object and of the keys it was given digests
// for (KeyReader).
func (c *SourceState) Covers(keys []string) bool {
	if c.Whole == nil || keys == nil {
		return true
	}
	for _, k := range keys {
		if _, ok := slices.BinarySearch(c.covered, k); !ok {
			return false
		}
	}
	return true
}

// withKeys returns a copy of a large source's state that also answers reads
// of keys (sorted), whose digests, and fields outside "data", are given.
// The maps are shared, never written.
func (c *SourceState) withKeys(keys []string, digests map[string]Digest, inFields map[string]string) *SourceState {
	out := *c
	out.Digests, out.Fields, out.covered = DigestsOf(digests), inFields, keys
	return &out
}

// dataDigest digests all the data: keys, the field of each, and values.
func (c *SourceState) dataDigest() Digest {
	if c.Whole != nil {
		return c.Whole.Data
	}
	var d Digest
	copy(d[:], c.sum(nil, c.inField, sha256.New))
	return d
}
