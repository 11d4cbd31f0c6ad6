package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

const (
	// PluginName is the krew plugin's name: `kubectl krew install
	// restart-controller`, run as `kubectl restart-controller`.
	PluginName = "restart-controller"
	// Binary is the executable in each archive, as `make plugin` names it.
	Binary = "kubectl-restart_controller"
	// ManifestPath is where the manifest is written under the output
	// folder: krew-index keeps plugins/NAME.yaml, and a release submits it
	// there with the release's URLs and sums.
	ManifestPath = "plugins/" + PluginName + ".yaml"
	// SumsFile lists each archive's SHA-256 in sha256sum's format, so that
	// `sha256sum -c SHA256SUMS` checks a download.
	SumsFile = "SHA256SUMS"

	homepage         = "https://github.com/restart-controller/restart-controller"
	shortDescription = "Explain and check restart-controller's restarts"
	description      = `The operator CLI of restart-controller, the controller that restarts
workloads when the ConfigMaps and Secrets they read change. explain shows
what a workload reads and what the controller would do with it now, or
which workloads a change of a source would restart; check validates a
config file and the cluster and RBAC it needs; migrate writes the config
that gives a Reloader installation's behaviour. Read-only, with your own
credentials and kubectl's flags.
`
)

// Platform is a GOOS and GOARCH.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// dir is the folder `make dist` builds the platform's binary into.
func (p Platform) dir() string { return p.OS + "_" + p.Arch }

// ParsePlatforms reads "linux/amd64 darwin/arm64 ..." (spaces or commas).
func ParsePlatforms(s string) ([]Platform, error) {
	var ps []Platform
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		goos, arch, ok := strings.Cut(f, "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q is not OS/ARCH", f)
		}
		p := Platform{goos, arch}
		if slices.Contains(ps, p) {
			return nil, fmt.Errorf("platform %s is given twice", p)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, errors.New("no platforms given")
	}
	return ps, nil
}

// Options are what Package needs; main fills them from flags.
type Options struct {
	// Version is the Makefile's VERSION, as the binaries carry it
	// (-X main.version).
	Version string
	// URLBase is where the archives will be downloaded from: each
	// platform's uri is URLBase/ARCHIVE.
	URLBase string
	// Bins holds OS_ARCH/kubectl-restart_controller for each platform.
	Bins string
	// Out is replaced by the archives, SumsFile and ManifestPath.
	Out       string
	Platforms []Platform
	// License is the repository's license file, put in every archive
	// (krew-index requires one to be installed); empty when it has none.
	License string
	// ModTime is every time in the archives, so that the same binaries
	// give the same archives and sums.
	ModTime time.Time
}

// ArchiveName is the file name of a platform's archive.
func ArchiveName(v string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", Binary, fileSafe(v), p.OS, p.Arch)
}

// fileSafe keeps letters, digits, '.', '_' and '-' of a version, for file
// names and URLs.
func fileSafe(v string) string {
	b := []byte(v)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "dev"
	}
	return string(b)
}

// ManifestVersion is the manifest's spec.version for VERSION v: v itself
// when it is what krew requires (a semantic version with a leading "v", as
// a release tag is), else a pre-release of v0.0.0 that carries v as build
// metadata (an untagged commit describes itself as a hash), so that a
// development build still installs with krew. release says which.
func ManifestVersion(v string) (mv string, release bool) {
	if checkKrewVersion(v) == nil {
		return v, true
	}
	var ids []string
	for _, id := range strings.Split(v, ".") {
		id = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
				return r
			}
			return '-'
		}, id)
		if id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		ids = []string{"unknown"}
	}
	return "v0.0.0-dev+" + strings.Join(ids, "."), false
}

// Manifest is the krew manifest for the archives with the given sums
// (archive name to hex SHA-256).
func (o Options) Manifest(sums map[string]string) *Manifest {
	v, _ := ManifestVersion(o.Version)
	m := &Manifest{
		APIVersion: krewAPIVersion, Kind: krewKind, Metadata: Metadata{Name: PluginName},
		Spec: Spec{Version: v, Homepage: homepage, ShortDescription: shortDescription, Description: description},
	}
	for _, p := range o.Platforms {
		name := ArchiveName(o.Version, p)
		m.Spec.Platforms = append(m.Spec.Platforms, PlatformSpec{
			Selector: &Selector{MatchLabels: map[string]string{"os": p.OS, "arch": p.Arch}},
			URI:      strings.TrimSuffix(o.URLBase, "/") + "/" + name,
			Sha256:   sums[name],
			Bin:      Binary,
		})
	}
	return m
}

// Package replaces o.Out with the release: an archive per platform, the
// sums file and the krew manifest; then checks them with Verify, so that
// what it leaves is what the manifest promises.
func Package(o Options) error {
	if err := os.RemoveAll(o.Out); err != nil {
		return fmt.Errorf("clearing %s: %w", o.Out, err)
	}
	if err := os.MkdirAll(filepath.Join(o.Out, filepath.Dir(ManifestPath)), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.Out, err)
	}
	var license []byte
	if o.License != "" {
		var err error
		if license, err = os.ReadFile(o.License); err != nil {
			return fmt.Errorf("reading the license file: %w", err)
		}
	}
	sums := map[string]string{}
	for _, p := range o.Platforms {
		binPath := filepath.Join(o.Bins, p.dir(), Binary)
		bin, err := os.ReadFile(binPath)
		if err != nil {
			return fmt.Errorf("reading the %s binary (make dist builds it): %w", p, err)
		}
		entries := []archiveEntry{{name: Binary, mode: 0o755, data: bin}}
		if o.License != "" {
			entries = append(entries, archiveEntry{name: filepath.Base(o.License), mode: 0o644, data: license})
		}
		archive, err := tarGz(entries, o.ModTime)
		if err != nil {
			return fmt.Errorf("archiving the %s binary: %w", p, err)
		}
		name := ArchiveName(o.Version, p)
		if err := os.WriteFile(filepath.Join(o.Out, name), archive, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		sums[name] = sha256Hex(archive)
	}
	if err := os.WriteFile(filepath.Join(o.Out, SumsFile), formatSums(sums), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", SumsFile, err)
	}
	manifest, err := o.Manifest(sums).Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, ManifestPath), manifest, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", ManifestPath, err)
	}
	if err := Verify(o); err != nil {
		return fmt.Errorf("checking what was written: %w", err)
	}
	return nil
}

type archiveEntry struct {
	name string
	mode int64
	data []byte
}

// tarGz writes a reproducible archive: entries in the given order, files at
// the archive's root (krew links bin from the install folder), owner root,
// every time modTime, and a gzip header without name or time.
func tarGz(entries []archiveEntry, modTime time.Time) ([]byte, error) {
	var b bytes.Buffer
	gz, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.data)),
			ModTime: modTime.UTC().Truncate(time.Second), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// formatSums writes sha256sum's format ("HEX  NAME"), sorted by name.
func formatSums(sums map[string]string) []byte {
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	return b.Bytes()
}

func parseSums(data []byte) (map[string]string, error) {
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || !sha256Pattern.MatchString(sum) || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("line %d is not \"SHA256  NAME\": %q", line, sc.Text())
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("line %d: %s is listed twice", line, name)
		}
		sums[name] = sum
	}
	return sums, sc.Err()
}

// Verify checks a release folder as krew and a downloader will see it: the
// manifest passes krew's rules, has the version VERSION gives, selects each
// platform once, and points each at URLBase/ARCHIVE; each archive's
// SHA-256 is the manifest's and the sums file's; each holds, at its root,
// the executable bin built for its platform (statically, on Linux) and
// carrying VERSION, and the license file when there is one; and nothing
// else is there.
func Verify(o Options) error {
	raw, err := os.ReadFile(filepath.Join(o.Out, ManifestPath))
	if err != nil {
		return fmt.Errorf("reading the manifest: %w", err)
	}
	m, err := ParseManifest(ManifestPath, raw)
	if err != nil {
		return err
	}
	rawSums, err := os.ReadFile(filepath.Join(o.Out, SumsFile))
	if err != nil {
		return fmt.Errorf("reading the sums: %w", err)
	}
	sums, err := parseSums(rawSums)
	if err != nil {
		return fmt.Errorf("%s: %w", SumsFile, err)
	}

	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if want, _ := ManifestVersion(o.Version); m.Spec.Version != want {
		bad("manifest version %s, want %s for VERSION %s", m.Spec.Version, want, o.Version)
	}
	for _, p := range o.Platforms {
		n := 0
		for _, ps := range m.Spec.Platforms {
			if ps.Selector.Matches(p) {
				n++
			}
		}
		if n != 1 {
			bad("%d manifest platforms select %s, want 1", n, p)
		}
	}
	prefix := strings.TrimSuffix(o.URLBase, "/") + "/"
	listed := map[string]bool{}
	for i, ps := range m.Spec.Platforms {
		name, ok := strings.CutPrefix(ps.URI, prefix)
		if !ok || name == "" || strings.Contains(name, "/") {
			bad("spec.platforms[%d].uri %s is not an archive under %s", i, ps.URI, prefix)
			continue
		}
		listed[name] = true
		p := platformOf(ps.Selector, o.Platforms)
		if p == nil {
			bad("spec.platforms[%d] (%s) selects none of the platforms built", i, ps.Selector)
			continue
		}
		if want := ArchiveName(o.Version, *p); name != want {
			bad("spec.platforms[%d] (%s) downloads %s, want %s", i, p, name, want)
		}
		archive, err := os.ReadFile(filepath.Join(o.Out, name))
		if err != nil {
			bad("spec.platforms[%d]: %w", i, err)
			continue
		}
		sum := sha256Hex(archive)
		if ps.Sha256 != sum {
			bad("%s has SHA-256 %s, the manifest says %s", name, sum, ps.Sha256)
		}
		if sums[name] != sum {
			bad("%s has SHA-256 %s, %s says %q", name, sum, SumsFile, sums[name])
		}
		if err := checkArchive(archive, ps.Bin, *p, o); err != nil {
			bad("%s: %w", name, err)
		}
	}
	for name := range sums {
		if !listed[name] {
			bad("%s lists %s, which no manifest platform downloads", SumsFile, name)
		}
	}
	entries, err := os.ReadDir(o.Out)
	if err != nil {
		return fmt.Errorf("listing %s: %w", o.Out, err)
	}
	for _, e := range entries {
		if n := e.Name(); n != SumsFile && n != filepath.Dir(ManifestPath) && !listed[n] {
			bad("%s holds %s, which is not part of the release", o.Out, n)
		}
	}
	return errors.Join(errs...)
}

// platformOf is the one built platform the selector picks, or nil.
func platformOf(s *Selector, built []Platform) *Platform {
	var found *Platform
	for i := range built {
		if s.Matches(built[i]) {
			if found != nil {
				return nil
			}
			found = &built[i]
		}
	}
	return found
}

// checkArchive reads a platform's archive: bin, executable, for p, with the
// version in it; the license file when o has one; nothing else.
func checkArchive(archive []byte, bin string, p Platform, o Options) error {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return fmt.Errorf("not gzip: %w", err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	modes := map[string]int64{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s is not a regular file", h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("reading %s: %w", h.Name, err)
		}
		files[h.Name], modes[h.Name] = data, h.Mode
	}
	want := []string{bin}
	if o.License != "" {
		want = append(want, filepath.Base(o.License))
	}
	var got []string
	for n := range files {
		got = append(got, n)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("holds %q, want %q", got, want)
	}
	if modes[bin]&0o111 == 0 {
		return fmt.Errorf("%s is not executable (mode %o)", bin, modes[bin])
	}
	if got, err := binaryPlatform(files[bin]); err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	} else if got != p {
		return fmt.Errorf("%s is built for %s, the manifest installs it on %s", bin, got, p)
	}
	// -X main.version stores VERSION as a string constant: a binary
	// without it is left over from another build.
	if !bytes.Contains(files[bin], []byte(o.Version)) {
		return fmt.Errorf("%s does not carry VERSION %q: not built by this make dist", bin, o.Version)
	}
	return nil
}

var (
	elfArch   = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_386: "386", elf.EM_ARM: "arm"}
	machoArch = map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64", macho.Cpu386: "386"}
)

// binaryPlatform tells the platform of an executable from its header: ELF
// is taken for Linux and must be static (no program interpreter: the
// release is built with CGO_ENABLED=0), Mach-O is macOS.
func binaryPlatform(b []byte) (Platform, error) {
	if f, err := elf.NewFile(bytes.NewReader(b)); err == nil {
		arch, ok := elfArch[f.Machine]
		if !ok {
			return Platform{}, fmt.Errorf("ELF for machine %s", f.Machine)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				return Platform{}, errors.New("dynamically linked (it names a program interpreter); build with CGO_ENABLED=0")
			}
		}
		return Platform{"linux", arch}, nil
	}
	if f, err := macho.NewFile(bytes.NewReader(b)); err == nil {
		arch, ok := machoArch[f.Cpu]
		if !ok {
			return Platform{}, fmt.Errorf("Mach-O for CPU %s", f.Cpu)
		}
		return Platform{"darwin", arch}, nil
	}
	return Platform{}, errors.New("neither an ELF nor a Mach-O executable")
}
