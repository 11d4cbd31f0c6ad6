// Package checksum is the format of the checksums recorded on workloads:
// how a source's data is digested, key by key and as a whole, in each
// version of the format, keyed (Hasher) or not, and how a recorded checksum
// is parsed. It computes and parses; it holds no state and makes no calls,
// so the caches (internal/catalog), the source codec and the decision all
// agree on one definition. The key itself is kept by internal/checksumkey.
package checksum

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
)

// Version is the version of the checksums Hasher.Sum returns. Recorded
// checksums of an older version are still compared (Unkeyed), so that a new
// version re-records workloads once, without restarting them.
//
//	version 1: 16 hex characters, digests of the values alone (xing's
//	           format, and this controller's first)
//	version 3: "v3.KEYID:" and 16 hex characters, each key's digest also
//	           covering the data field that holds it, authenticated with
//	           HMAC-SHA-256 under a key only the controller holds (Hasher),
//	           so the annotation cannot be checked against guesses of the
//	           data by anyone who reads the workload
//
// There is no version 2: it was the unkeyed form of version 3's input, and
// no release recorded it. Parse reads "v2:" as no checksum at all.
const Version = 3

// Data is what a checksum covers: a source's keys, each with the digest of
// its value and the data field that holds it. It is read through methods,
// not handed over as a map or slice, so a cache computes checksums from the
// form it keeps, without copying it.
type Data interface {
	// Len is how many keys the data holds.
	Len() int
	// At returns the i-th key, in sorted order (each key once), and its
	// value's digest.
	At(i int) (key string, value Digest)
	// Lookup returns the digest of key's value; false when there is no key.
	Lookup(key string) (Digest, bool)
	// Field names the data field that holds key, e.g. "data".
	Field(key string) string
}

// Sum is the current version's checksum of exactly the data a reference
// reads: the given keys (present or absent), or every key when keys is nil.
// Without a key (the zero Hasher) it is empty: nothing can be recorded.
func (h Hasher) Sum(d Data, keys []string) string {
	if h.key == nil {
		return ""
	}
	return h.format(sum(d, keys, fieldDigest(d), func() hash.Hash { return hmac.New(sha256.New, h.key) }))
}

// format writes a version-3 checksum of this key.
func (h Hasher) format(sum []byte) string { return "v3." + h.id + ":" + hex.EncodeToString(sum[:8]) }

// Unkeyed computes a checksum of an earlier, unkeyed version (version 1,
// what earlier releases recorded), for comparing; ok is false for other
// versions.
func Unkeyed(version int, d Data, keys []string) (checksum string, ok bool) {
	if version != 1 {
		return "", false
	}
	return hex.EncodeToString(sum(d, keys, valueDigest, sha256.New)[:8]), true
}

// DataDigest digests all the data: keys, the field of each, and values.
// Equal data, equal digest; it is what WholeSums.Data holds for the same
// data, so the two forms of a source compare.
func DataDigest(d Data) Digest {
	var out Digest
	copy(out[:], sum(d, nil, fieldDigest(d), sha256.New))
	return out
}

// Parse splits a recorded checksum into its version (1 or 3), key ID
// (version 3) and sum; version 0 when it is not a checksum this build knows
// (absent, pending, "v2:", a later release's, or anything else): such a
// value never matches data.
func Parse(recorded string) (version int, keyID, sum string) {
	if isHex16(recorded) {
		return 1, "", recorded
	}
	rest, ok := strings.CutPrefix(recorded, "v")
	if !ok {
		return 0, "", ""
	}
	head, sum, ok := strings.Cut(rest, ":")
	if !ok || !isHex16(sum) {
		return 0, "", ""
	}
	n, keyID, _ := strings.Cut(head, ".")
	v, err := strconv.Atoi(n)
	if err != nil || v != Version || strconv.Itoa(v) != n || keyID == "" {
		return 0, "", ""
	}
	return v, keyID, sum
}

func isHex16(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// valueDigest is a key's version-1 digest: its value's alone.
func valueDigest(_ string, d Digest) Digest { return d }

// fieldDigest gives a key's digest covering the field of d that holds it,
// as versions from 3 on (and DataDigest) digest keys.
func fieldDigest(d Data) func(key string, value Digest) Digest {
	return func(key string, value Digest) Digest { return InField(d.Field(key), value) }
}

// sum hashes the keys, with the per-key digests that keyDigest gives, into
// the hash newHash makes. WholeHasher computes the same for a large source
// in one pass, and must stay byte for byte what this writes.
func sum(d Data, keys []string, keyDigest func(key string, d Digest) Digest, newHash func() hash.Hash) []byte {
	h := newHash()
	var lenBuf [8]byte
	writeKey := func(k string) {
		binary.BigEndian.PutUint64(lenBuf[:], uint64(len(k)))
		h.Write(lenBuf[:])
		h.Write(bytesOf(k))
	}
	if keys == nil {
		h.Write([]byte{'w'})
		for i := range d.Len() {
			k, v := d.At(i)
			v = keyDigest(k, v)
			writeKey(k)
			h.Write(v[:])
		}
	} else {
		h.Write([]byte{'k'})
		for _, k := range keys {
			writeKey(k)
			if v, ok := d.Lookup(k); ok {
				v = keyDigest(k, v)
				h.Write([]byte{1})
				h.Write(v[:])
			} else {
				// An absent key is part of what the pod sees (an empty env var,
				// a missing file), and its later appearance is a change.
				h.Write([]byte{0})
			}
		}
	}
	return h.Sum(nil)
}
