package catalog

import "github.com/restart-controller/restart-controller/internal/checksum"

// KeyDigest and Digests are a source's key digests, sorted by key, each key
// once (checksum.Digests).
type (
	KeyDigest = checksum.KeyDigest
	Digests   = checksum.Digests
)

// DigestsOf returns the digests of a map, sorted; nil for nil.
func DigestsOf(m map[string]checksum.Digest) Digests { return checksum.DigestsOf(m) }
