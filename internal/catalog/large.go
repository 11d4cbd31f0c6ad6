package catalog

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/sourcecodec"
)

// A source's per-key digests cost memory per key: about 80 bytes of map
// entry, digest and short name (TestLargeSourceCostDoesNotGrowWithKeys
// measures it).
// Keys cost a tenant almost nothing to create: a valid 1 MB ConfigMap holds
// 80,000 empty keys, 6 MiB of digests, and one able to create ConfigMaps
// anywhere could make the controller run out of memory. So a source keeps
// one digest per key only within these bounds; a larger one keeps the
// checksums of its whole data instead (checksum.WholeSums), a few hundred
// bytes whatever its keys, and the keys that workloads read of it are read
// when a decision needs them (ReduceKeys, WithKeys).
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
// pass over its keys in sorted order, the order checksums use, and returns
// as well the digests (and fields outside "data") of the wanted keys, which
// must be sorted. The only memory it keeps while it runs is the list of key
// names; each value is hashed once, where the decoded object holds it.
func wholeSums(fields []dataField, sums checksum.Hasher, wanted []string) (*checksum.WholeSums, map[string]checksum.Digest, map[string]string) {
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
	w := newWholeReader(sums, wanted)
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

// wholeReader feeds a source's keys, in sorted order, to a
// checksum.WholeHasher, and keeps the digests of the wanted keys (sorted)
// on the way: what ReduceKeys gives a large source's state.
type wholeReader struct {
	sums    *checksum.WholeHasher
	wanted  []string
	digests map[string]checksum.Digest
	fields  map[string]string
}

func newWholeReader(sums checksum.Hasher, wanted []string) *wholeReader {
	return &wholeReader{sums: checksum.NewWholeHasher(sums), wanted: wanted, digests: map[string]checksum.Digest{}}
}

func (w *wholeReader) add(key []byte, field string, d checksum.Digest) {
	w.sums.Add(key, field, d)
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

func (w *wholeReader) finish() (*checksum.WholeSums, map[string]checksum.Digest, map[string]string) {
	return w.sums.Sums(), w.digests, w.fields
}

// Large reports whether the state keeps the checksums of its whole data
// instead of one digest per key.
func (c *SourceState) Large() bool { return c.Whole != nil }

// Covers reports whether the state answers a read of keys (nil: the whole
// object). A state with one digest per key answers every read; a large
// source's, reads of the whole object and of the keys it was given digests
// for (WithKeys).
func (c *SourceState) Covers(keys []string) bool {
	if c.Whole == nil || keys == nil {
		return true
	}
	if c.covered == nil {
		return len(keys) == 0
	}
	for _, k := range keys {
		if _, ok := slices.BinarySearch(*c.covered, k); !ok {
			return false
		}
	}
	return true
}

// WithKeys returns a copy of a large source's state that also answers reads
// of the keys read of its object (ReduceKeys); the maps are shared, never
// written. The caller checks that k.Data is c's data (Whole.Data).
func (c *SourceState) WithKeys(k *KeyDigests) *SourceState {
	out := *c
	out.Digests, out.Fields, out.covered = checksum.DigestsOf(k.Digests), k.Fields, &k.Keys
	return &out
}

// KeyDigests are the digests of some keys of a source object's data, read
// from the object itself: what the cached state of a large source, which
// keeps only whole-object checksums, needs to answer reads of them
// (WithKeys).
type KeyDigests struct {
	Keys    []string // sorted
	Digests map[string]checksum.Digest
	// Fields names the field of each key outside "data".
	Fields map[string]string
	// Data digests the object's whole data: a cached state with another
	// (Whole.Data) holds other data than the object read.
	Data checksum.Digest
}

// ReduceKeys reduces a source object, as read from the API server, to the
// digests of keys (sorted).
func ReduceKeys(obj runtime.Object, dataFields, keys []string) (*KeyDigests, error) {
	if e, ok := obj.(*sourcecodec.Source); ok {
		whole, digests, inFields := encodedWholeSums(e, e.Fields(dataFields), checksum.Hasher{}, keys)
		return &KeyDigests{Keys: keys, Digests: digests, Fields: inFields, Data: whole.Data}, nil
	}
	fields, _, err := dataFieldsOf(obj, dataFields)
	if err != nil {
		return nil, err
	}
	whole, digests, inFields := wholeSums(fields, checksum.Hasher{}, keys)
	return &KeyDigests{Keys: keys, Digests: digests, Fields: inFields, Data: whole.Data}, nil
}

// dataDigest digests all the data: keys, the field of each, and values.
func (c *SourceState) dataDigest() checksum.Digest {
	if c.Whole != nil {
		return c.Whole.Data
	}
	return checksum.DataDigest(c.data())
}
