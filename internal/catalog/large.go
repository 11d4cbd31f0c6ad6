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
func wholeSums(fields []dataField, sums Hasher, wanted []string) (whole *WholeSums, digests map[string]Digest, inFields map[string]string) {
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

	whole = &WholeSums{Keys: len(keys)}
	v1, v2 := sha256.New(), sha256.New()
	var v3 hash.Hash
	if sums.key != nil {
		v3 = hmac.New(sha256.New, sums.key)
		whole.KeyID = sums.id
	}
	write := func(b []byte, to ...hash.Hash) {
		for _, h := range to {
			if h != nil {
				h.Write(b)
			}
		}
	}
	var lenBuf [8]byte
	write([]byte{'w'}, v1, v2, v3)
	digests = map[string]Digest{}
	for _, key := range keys {
		// The later field in the order of dataFields holds a key that is
		// in two, as SourceState.set keeps it.
		var d Digest
		field := ""
		for i := len(fields) - 1; i >= 0; i-- {
			var ok bool
			if d, ok = fields[i].digest(key); ok {
				field = fields[i].name
				break
			}
		}
		binary.BigEndian.PutUint64(lenBuf[:], uint64(len(key)))
		write(lenBuf[:], v1, v2, v3)
		write(bytesOf(key), v1, v2, v3)
		write(d[:], v1)
		keyed := inField(field, d)
		write(keyed[:], v2, v3)
		for len(wanted) > 0 && wanted[0] < key {
			wanted = wanted[1:]
		}
		if len(wanted) > 0 && wanted[0] == key {
			digests[key] = d
			if field != defaultField {
				if inFields == nil {
					inFields = map[string]string{}
				}
				inFields[key] = field
			}
		}
	}
	copy(whole.V1[:], v1.Sum(nil))
	sum2 := v2.Sum(nil)
	copy(whole.V2[:], sum2)
	copy(whole.Data[:], sum2)
	if v3 != nil {
		copy(whole.V3[:], v3.Sum(nil))
	}
	return whole, digests, inFields
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
	out.Digests, out.Fields, out.covered = digests, inFields, keys
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
