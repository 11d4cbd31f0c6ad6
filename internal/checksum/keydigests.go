package checksum

import (
	"slices"
	"strings"
)

// A source's per-key digests as the controller's caches keep them
// (package catalog), here so that the catalog keeps to its size.

// KeyDigest is the digest of one key's value.
type KeyDigest struct {
	Key    string
	Digest Digest
}

// Digests are a source's key digests, sorted by key, each key once. A
// slice costs 32 bytes a key; the map it replaces cost about 320 bytes for
// a source of one or two keys (a Go map allocates a group of eight slots),
// 9.5 MB of the heap at 30,000 small sources.
type Digests []KeyDigest

// DigestsOf returns the digests of a map, sorted; nil for nil.
func DigestsOf(m map[string]Digest) Digests {
	if m == nil {
		return nil
	}
	out := make(Digests, 0, len(m))
	for k, d := range m {
		out = append(out, KeyDigest{k, d})
	}
	slices.SortFunc(out, func(a, b KeyDigest) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Get returns the digest of key.
func (d Digests) Get(key string) (Digest, bool) {
	i, ok := slices.BinarySearchFunc(d, key, func(e KeyDigest, k string) int { return strings.Compare(e.Key, k) })
	if !ok {
		return Digest{}, false
	}
	return d[i].Digest, true
}

// Keys returns the keys, sorted.
func (d Digests) Keys() []string {
	keys := make([]string, len(d))
	for i, e := range d {
		keys[i] = e.Key
	}
	return keys
}

// DigestsBuilder collects digests in any order; a key set twice keeps its
// last digest, as the map it replaces did.
type DigestsBuilder struct{ list Digests }

func (b *DigestsBuilder) Set(key string, d Digest) {
	b.list = append(b.list, KeyDigest{key, d})
}

// Done sorts the digests and keeps the last of each key; never nil.
func (b *DigestsBuilder) Done() Digests {
	out := b.list
	if out == nil {
		return Digests{}
	}
	slices.SortStableFunc(out, func(a, b KeyDigest) int { return strings.Compare(a.Key, b.Key) })
	// Keep the last of each run of equal keys.
	w := 0
	for i := range out {
		if i+1 < len(out) && out[i+1].Key == out[i].Key {
			continue
		}
		out[w] = out[i]
		w++
	}
	clear(out[w:])
	out = out[:w]
	if cap(out) > len(out) {
		out = slices.Clip(slices.Clone(out))
	}
	return out
}
