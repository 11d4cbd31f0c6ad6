package checksum

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"unsafe"
)

// Digest identifies one value of a source key without holding the value.
// Digests stay unkeyed SHA-256: they never leave the process; only the
// checksums made of them are recorded.
type Digest [16]byte

// DigestBase64 digests a byte value as its base64 text, which is what JSON
// carries for it, so that every way of fetching a source gives the same
// digest. The encoding streams into the hash: no copy of the value is made.
func DigestBase64(value []byte) Digest {
	h := sha256.New()
	enc := base64.NewEncoder(base64.StdEncoding, h)
	_, _ = enc.Write(value) // writes to a hash cannot fail
	_ = enc.Close()
	return Digest(h.Sum(nil)[:len(Digest{})])
}

// DigestString digests a string value. It hashes a view of the string, not a
// copy: values are up to 1 MiB and the hash neither keeps nor changes its
// input. Copying was a fifth transient copy of all source data during sync
// (see BENCHMARKS.md).
func DigestString(v string) Digest {
	return digestOf(bytesOf(v))
}

// DigestValue digests a value of a source decoded from JSON: a string as
// DigestString does, anything else by its JSON encoding.
func DigestValue(value interface{}) Digest {
	if v, ok := value.(string); ok {
		return DigestString(v)
	}
	// Source kinds declared by configuration may hold non-string values;
	// encoding/json sorts map keys, so the encoding is stable.
	raw, _ := json.Marshal(value)
	return digestOf(raw)
}

// InField is a key's field-aware digest (version 3's, and DataDigest's): the
// data field and the value's digest,
// length-prefixed, so that no two (field, value) pairs share an encoding.
// Derived from the value digest rather than from the value, so the value is
// hashed once however many versions are kept comparable.
//
// The input is laid out in a buffer on the stack and hashed at once: a large
// source computes this for each of its keys when it enters the cache.
func InField(field string, value Digest) Digest {
	var stack [64]byte
	buf := stack[:0]
	if n := 8 + len(field) + 8 + len(value); n > len(stack) {
		buf = make([]byte, 0, n)
	}
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(field)))
	buf = append(buf, field...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(value)))
	buf = append(buf, value[:]...)
	return digestOf(buf)
}

// digestOf is the Digest of b: the first half of its SHA-256.
func digestOf(b []byte) Digest {
	sum := sha256.Sum256(b)
	return Digest(sum[:len(Digest{})])
}

// bytesOf is a read-only view of a string's bytes, for hashing without a copy.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
