package checksum

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// MinKeySize is the least HMAC key length accepted, in bytes: SHA-256's size.
const MinKeySize = 32

// Hasher keys the checksums recorded on workloads (version 3). Anyone who
// may read a workload reads its checksums annotation; unkeyed, a checksum of
// a Secret with little entropy (a PIN, a short password) is reversed by
// trying every candidate. Keyed with a secret only the controller holds, a
// checksum only says whether the data changed.
//
// The key's ID, recorded in every checksum, is a digest of the key: it tells
// which key a checksum was made with, so a new key (rotated, or lost) is
// noticed and the recorded checksums re-baselined instead of compared.
// A Hasher is immutable; the zero value holds no key and computes nothing.
type Hasher struct {
	id  string
	key []byte
}

// NewHasher returns a Hasher for the key.
func NewHasher(key []byte) (Hasher, error) {
	if len(key) < MinKeySize {
		return Hasher{}, fmt.Errorf("checksum key is %d bytes; at least %d are needed", len(key), MinKeySize)
	}
	sum := sha256.Sum256(append([]byte("restart-controller checksum key id\x00"), key...))
	return Hasher{id: hex.EncodeToString(sum[:4]), key: append([]byte(nil), key...)}, nil
}

// KeyID identifies the key in recorded checksums; empty without a key.
func (h Hasher) KeyID() string { return h.id }

// Rebaseline reports whether a recorded checksum was made with another key:
// it cannot be compared with anything, so the current data is recorded in
// its place without a restart (docs/design.md, Checksums).
func (h Hasher) Rebaseline(recorded string) bool {
	v, keyID, _ := Parse(recorded)
	return v == 3 && keyID != h.id
}
