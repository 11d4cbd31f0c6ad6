// Package examples holds the example configuration and the presets as
// files for people to read and copy, and embeds them for the programs that
// start from one (the operator CLI's migrate writes the Reloader preset,
// adjusted). The files are the source; this package only carries them.
package examples

import "embed"

// presets is read-only by construction: embed.FS has no way to write.
//
//go:embed presets/*.yaml
var presets embed.FS

// Preset returns the preset file named name (e.g. "reloader"), as written.
func Preset(name string) ([]byte, error) {
	return presets.ReadFile("presets/" + name + ".yaml")
}
