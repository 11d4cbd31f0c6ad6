package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var allPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// fakeBinary is an executable header for p (what Verify reads) followed by
// the version string, as -X main.version leaves it in a real binary.
func fakeBinary(t *testing.T, p Platform, version string, dynamic bool) []byte {
	t.Helper()
	var b bytes.Buffer
	le := binary.LittleEndian
	switch p.OS {
	case "linux":
		machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch]
		h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
			Ehsize: 64, Phentsize: 56, Shentsize: 64}
		copy(h.Ident[:], elf.ELFMAG)
		h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
		if dynamic {
			h.Phoff, h.Phnum = 64, 1
		}
		must(t, binary.Write(&b, le, h))
		if dynamic {
			must(t, binary.Write(&b, le, elf.Prog64{Type: uint32(elf.PT_INTERP), Off: 120, Filesz: 1, Memsz: 1}))
		}
	case "darwin":
		cpu := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]
		must(t, binary.Write(&b, le, macho.FileHeader{Magic: macho.Magic64, Cpu: cpu, Type: macho.TypeExec}))
		must(t, binary.Write(&b, le, uint32(0))) // reserved, in 64-bit headers
	default:
		t.Fatalf("no fake binary for %s", p)
	}
	b.WriteString("\x00restart-controller " + version + "\x00")
	return b.Bytes()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fakeRelease writes fake binaries for every platform (binaryFor may
// change one) and returns Options for them.
func fakeRelease(t *testing.T, version string, license bool, binaryFor func(Platform) []byte) Options {
	t.Helper()
	dir := t.TempDir()
	o := Options{Version: version, URLBase: "https://example.test/releases/" + version, Bins: filepath.Join(dir, "bins"),
		Out: filepath.Join(dir, "dist"), Platforms: allPlatforms, ModTime: time.Unix(1700000000, 0)}
	for _, p := range allPlatforms {
		b := binaryFor(p)
		must(t, os.MkdirAll(filepath.Join(o.Bins, p.dir()), 0o755))
		must(t, os.WriteFile(filepath.Join(o.Bins, p.dir(), Binary), b, 0o755))
	}
	if license {
		o.License = filepath.Join(dir, "LICENSE")
		must(t, os.WriteFile(o.License, []byte("the license\n"), 0o644))
	}
	return o
}

func goodRelease(t *testing.T, version string, license bool) Options {
	return fakeRelease(t, version, license, func(p Platform) []byte { return fakeBinary(t, p, version, false) })
}

func readArchive(t *testing.T, path string) map[string]*tar.Header {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	must(t, err)
	tr := tar.NewReader(gz)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		must(t, err)
		out[h.Name] = h
	}
}

// TestPackage: the archives, the sums and the manifest agree, as krew and
// sha256sum -c will check them, and the same input gives the same bytes.
func TestPackage(t *testing.T) {
	for _, license := range []bool{false, true} {
		o := goodRelease(t, "v1.2.3", license)
		must(t, Package(o))

		raw, err := os.ReadFile(filepath.Join(o.Out, ManifestPath))
		must(t, err)
		m, err := ParseManifest(ManifestPath, raw)
		must(t, err)
		if m.Spec.Version != "v1.2.3" || m.Metadata.Name != PluginName || len(m.Spec.Platforms) != len(allPlatforms) {
			t.Fatalf("manifest %+v", m)
		}
		sums, err := os.ReadFile(filepath.Join(o.Out, SumsFile))
		must(t, err)
		for i, p := range allPlatforms {
			ps := m.Spec.Platforms[i]
			name := ArchiveName("v1.2.3", p)
			if want := "https://example.test/releases/v1.2.3/" + name; ps.URI != want {
				t.Errorf("uri %s, want %s", ps.URI, want)
			}
			archive, err := os.ReadFile(filepath.Join(o.Out, name))
			must(t, err)
			sum := sha256.Sum256(archive)
			if hex.EncodeToString(sum[:]) != ps.Sha256 {
				t.Errorf("%s: the manifest's sha256 is not the archive's", name)
			}
			if line := hex.EncodeToString(sum[:]) + "  " + name + "\n"; !strings.Contains(string(sums), line) {
				t.Errorf("%s lacks %q:\n%s", SumsFile, line, sums)
			}
			entries := readArchive(t, filepath.Join(o.Out, name))
			want := []string{Binary}
			if license {
				want = append(want, "LICENSE")
			}
			var got []string
			for n := range entries {
				got = append(got, n)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) || entries[Binary].Mode != 0o755 || !entries[Binary].ModTime.Equal(o.ModTime) {
				t.Errorf("%s holds %q (binary %+v), want %q, the binary 0755 at the source date", name, got, entries[Binary], want)
			}
		}
		if out, err := exec.Command("sha256sum", "--version").CombinedOutput(); err == nil && len(out) > 0 {
			cmd := exec.Command("sha256sum", "-c", SumsFile)
			cmd.Dir = o.Out
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("sha256sum -c %s: %v\n%s", SumsFile, err, out)
			}
		}

		// Reproducible: packaging the same binaries again gives the same files.
		first := snapshot(t, o.Out)
		must(t, Package(o))
		if again := snapshot(t, o.Out); !maps(first, again) {
			t.Error("packaging the same binaries twice gave different files")
		}
	}
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	}))
	return out
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPackageRefuses: binaries that are not what the manifest would
// promise fail `make dist` instead of being released.
func TestPackageRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		binary func(t *testing.T, p Platform) []byte
		want   string
	}{
		{"wrong arch", func(t *testing.T, p Platform) []byte {
			if p == (Platform{"darwin", "arm64"}) {
				p.Arch = "amd64"
			}
			return fakeBinary(t, p, "v1.2.3", false)
		}, "is built for darwin/amd64, the manifest installs it on darwin/arm64"},
		{"dynamic", func(t *testing.T, p Platform) []byte {
			return fakeBinary(t, p, "v1.2.3", p.OS == "linux" && p.Arch == "arm64")
		}, "dynamically linked"},
		{"stale", func(t *testing.T, p Platform) []byte {
			v := "v1.2.3"
			if p.Arch == "amd64" {
				v = "v1.2.2"
			}
			return fakeBinary(t, p, v, false)
		}, `does not carry VERSION "v1.2.3"`},
		{"not a binary", func(*testing.T, Platform) []byte { return []byte("#!/bin/sh\necho v1.2.3\n") }, "neither an ELF nor a Mach-O"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := fakeRelease(t, "v1.2.3", false, func(p Platform) []byte { return c.binary(t, p) })
			if err := Package(o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Package: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestVerifyCatches: a release changed after packaging fails Verify.
func TestVerifyCatches(t *testing.T) {
	name := ArchiveName("v1.2.3", allPlatforms[0])
	for _, c := range []struct {
		name   string
		change func(t *testing.T, o *Options)
		want   string
	}{
		{"archive replaced", func(t *testing.T, o *Options) {
			must(t, os.WriteFile(filepath.Join(o.Out, name), []byte("not it"), 0o644))
		}, "has SHA-256"},
		{"manifest sum", func(t *testing.T, o *Options) {
			edit(t, filepath.Join(o.Out, ManifestPath), func(s string) string {
				return regexp.MustCompile(`sha256: [0-9a-f]{64}`).ReplaceAllString(s, "sha256: "+strings.Repeat("0", 64))
			})
		}, "the manifest says 0000"},
		{"sums file", func(t *testing.T, o *Options) {
			edit(t, filepath.Join(o.Out, SumsFile), func(s string) string { return strings.Replace(s, "  ", "0  ", 1)[1:] })
		}, SumsFile + " says"},
		{"extra file", func(t *testing.T, o *Options) {
			must(t, os.WriteFile(filepath.Join(o.Out, "notes.txt"), nil, 0o644))
		}, "holds notes.txt, which is not part of the release"},
		{"another URL base", func(t *testing.T, o *Options) { o.URLBase = "https://elsewhere.test/x" }, "is not an archive under https://elsewhere.test/x/"},
		{"another version", func(t *testing.T, o *Options) { o.Version = "v1.2.4" }, "manifest version v1.2.3, want v1.2.4"},
		{"a platform missing", func(t *testing.T, o *Options) {
			o.Platforms = append(slices.Clone(o.Platforms), Platform{"linux", "ppc64le"})
		}, "0 manifest platforms select linux/ppc64le, want 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := goodRelease(t, "v1.2.3", false)
			must(t, Package(o))
			must(t, Verify(o))
			c.change(t, &o)
			if err := Verify(o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Verify: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func edit(t *testing.T, path string, f func(string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	changed := f(string(b))
	if changed == string(b) {
		t.Fatalf("the edit changed nothing in %s", path)
	}
	must(t, os.WriteFile(path, []byte(changed), 0o644))
}

func TestManifestVersion(t *testing.T) {
	for _, c := range []struct {
		in, want string
		release  bool
	}{
		{"v1.2.3", "v1.2.3", true},
		{"v1.2.3-rc.1", "v1.2.3-rc.1", true},
		{"v1.2.3-4-gc3aacbc-dirty", "v1.2.3-4-gc3aacbc-dirty", true}, // git describe after a tag
		{"1.2.3", "v0.0.0-dev+1.2.3", false},
		{"c3aacbc", "v0.0.0-dev+c3aacbc", false}, // git describe without a tag
		{"c3aacbc-dirty", "v0.0.0-dev+c3aacbc-dirty", false},
		{"dev", "v0.0.0-dev+dev", false},
		{"feature/x y..z", "v0.0.0-dev+feature-x-y.z", false},
		{"", "v0.0.0-dev+unknown", false},
	} {
		got, release := ManifestVersion(c.in)
		if got != c.want || release != c.release {
			t.Errorf("ManifestVersion(%q) = %q, %v; want %q, %v", c.in, got, release, c.want, c.release)
		}
		if err := checkKrewVersion(got); err != nil {
			t.Errorf("ManifestVersion(%q) = %q, which krew refuses: %v", c.in, got, err)
		}
	}
}

// validManifest is a manifest that passes, for TestManifestRules to break.
const validManifest = `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: restart-controller
spec:
  version: v1.2.3
  homepage: https://example.test
  shortDescription: Explain and check restarts
  description: |
    Several words.
  platforms:
    - selector:
        matchLabels: {os: linux, arch: amd64}
      uri: https://example.test/a_linux_amd64.tar.gz
      sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      bin: kubectl-restart_controller
    - selector:
        matchExpressions: [{key: os, operator: In, values: [darwin]}]
      uri: https://example.test/a_darwin.zip
      sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      bin: kubectl-restart_controller
`

// TestManifestRules breaks krew's manifest rules one at a time.
func TestManifestRules(t *testing.T) {
	if _, err := ParseManifest("plugins/restart-controller.yaml", []byte(validManifest)); err != nil {
		t.Fatalf("the valid manifest fails: %v", err)
	}
	sum := "sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n      bin: kubectl-restart_controller\n    - selector"
	for _, c := range []struct {
		name, file, old, new, want string
	}{
		{"api version", "", "v1alpha2", "v1alpha1", "apiVersion is"},
		{"kind", "", "kind: Plugin", "kind: Tool", `kind is "Tool"`},
		{"name is not the file's", "plugins/other.yaml", "", "", `must be the file name without .yaml, "other"`},
		{"not .yaml", "plugins/restart-controller.yml", "", "", "must end in .yaml"},
		{"unsafe name", "plugins/a.b.yaml", "name: restart-controller", "name: a.b", "must match"},
		{"windows name", "plugins/com1.yaml", "name: restart-controller", "name: com1", "reserved file name on Windows"},
		{"no version", "", "version: v1.2.3", "version: ''", "spec.version is required"},
		{"version without v", "", "version: v1.2.3", "version: 1.2.3", `does not start with "v"`},
		{"version not semver", "", "version: v1.2.3", "version: v1.2", "not a semantic version"},
		{"no short description", "", "shortDescription: Explain and check restarts", "shortDescription: ''", "shortDescription is required"},
		{"short description of two lines", "", "shortDescription: Explain and check restarts", `shortDescription: "a\nb"`, "must be one line"},
		{"long short description", "", "shortDescription: Explain and check restarts", "shortDescription: " + strings.Repeat("word ", 11), "krew-index asks for a few words"},
		{"no description", "", "  description: |\n    Several words.\n", "", "spec.description is required"},
		{"no platforms", "", "", "", "must name at least one platform"},
		{"no uri", "", "uri: https://example.test/a_linux_amd64.tar.gz", "uri: ''", "spec.platforms[0]: uri is required"},
		{"uri not an archive", "", "a_linux_amd64.tar.gz", "a_linux_amd64", "must be a .tar.gz or .zip archive"},
		{"no sha256", "", sum, "sha256: ''\n      bin: x\n    - selector", "spec.platforms[0]: sha256 is required"},
		{"sha256 in capitals", "", sum, "sha256: 0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n      bin: x\n    - selector", "must match ^[a-f0-9]{64}$"},
		{"sha256 too short", "", sum, "sha256: 0123\n      bin: x\n    - selector", "must match"},
		{"no bin", "", sum, strings.Replace(sum, "bin: kubectl-restart_controller", "bin: ''", 1), "spec.platforms[0]: bin is required"},
		{"empty files", "", "bin: kubectl-restart_controller\n    - selector", "bin: x\n      files: []\n    - selector", "files must be left out or name at least one file"},
		{"file without to", "", "bin: kubectl-restart_controller\n    - selector", "bin: x\n      files: [{from: LICENSE}]\n    - selector", "files[0] needs from and to"},
		{"no selector", "", "    - selector:\n        matchLabels: {os: linux, arch: amd64}\n      uri", "    - uri", "selector: required"},
		{"empty selector", "", "matchLabels: {os: linux, arch: amd64}", "matchLabels: {}", "matchLabels is given but empty"},
		{"selector key", "", "matchLabels: {os: linux, arch: amd64}", "matchLabels: {os: linux, distro: debian}", `key "distro": krew selects on os and arch only`},
		{"selector matching nothing", "", "matchLabels: {os: linux, arch: amd64}", "matchLabels: {os: plan9}", "selects none of the platforms krew runs on"},
		{"overlapping selectors", "", "values: [darwin]", "values: [darwin, linux]", "spec.platforms [0 1] all select linux/amd64"},
		{"unknown field", "", "  homepage:", "  website: x\n  homepage:", "field website not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := c.file
			if file == "" {
				file = "plugins/restart-controller.yaml"
			}
			m := validManifest
			switch {
			case c.name == "no platforms":
				m = m[:strings.Index(m, "  platforms:")] + "  platforms: []\n"
			case c.old != "":
				if !strings.Contains(m, c.old) {
					t.Fatalf("the valid manifest has no %q", c.old)
				}
				m = strings.Replace(m, c.old, c.new, 1)
			}
			_, err := ParseManifest(file, []byte(m))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q\n%s", err, c.want, m)
			}
		})
	}
}

// TestMakeDist reads `make -n dist` (the commands, none run): each platform
// is built with the flags `make plugin` uses, and hack/dist packages them
// with the Makefile's VERSION, DIST_URL_BASE and platforms. Then it runs
// those packaging arguments on fake binaries, so the Makefile's call is the
// one the other tests check.
func TestMakeDist(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make:", err)
	}
	makeN := func(args ...string) string {
		cmd := exec.Command("make", append([]string{"-n", "--no-print-directory", "VERSION=v9.9.9", "GO=go"}, args...)...)
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", args, err, out)
		}
		return string(out)
	}
	plugin := regexp.MustCompile(`(?m)^CGO_ENABLED=0 go build (.*) -o bin/kubectl-restart_controller ./cmd/kubectl-restart_controller$`).
		FindStringSubmatch(makeN("plugin"))
	if plugin == nil {
		t.Fatal("make -n plugin does not show the plugin's build")
	}
	dist := makeN("dist", "DIST_URL_BASE=https://example.test/r/v9.9.9")
	for _, p := range allPlatforms {
		want := "CGO_ENABLED=0 GOOS=" + p.OS + " GOARCH=" + p.Arch + " go build " + plugin[1] +
			" -o bin/dist/" + p.dir() + "/" + Binary + " ./cmd/kubectl-restart_controller\n"
		if !strings.Contains(dist, want) {
			t.Errorf("make dist does not build %s as make plugin does:\n  want %s\n%s", p, want, dist)
		}
	}
	m := regexp.MustCompile(`(?m)^go run ./hack/dist (.*)$`).FindStringSubmatch(dist)
	if m == nil {
		t.Fatalf("make dist does not run hack/dist:\n%s", dist)
	}
	// The arguments are double-quoted words without quotes inside.
	var args []string
	for _, a := range regexp.MustCompile(`"[^"]*"|\S+`).FindAllString(m[1], -1) {
		args = append(args, strings.Trim(a, `"`))
	}
	dir := t.TempDir()
	for i := range args {
		switch args[i] {
		case "-bins":
			bins := goodRelease(t, "v9.9.9", false).Bins
			args[i+1] = bins
		case "-out":
			args[i+1] = filepath.Join(dir, "dist")
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(append(args, "-root", dir), &stdout, &stderr); code != 0 {
		t.Fatalf("hack/dist %q: exit %d\n%s", args, code, stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "dist", ManifestPath))
	must(t, err)
	manifest, err := ParseManifest(ManifestPath, raw)
	must(t, err)
	var got []Platform
	for _, ps := range manifest.Spec.Platforms {
		got = append(got, *platformOf(ps.Selector, allPlatforms))
		if !strings.HasPrefix(ps.URI, "https://example.test/r/v9.9.9/") {
			t.Errorf("uri %s is not under DIST_URL_BASE", ps.URI)
		}
	}
	if !slices.Equal(got, allPlatforms) || manifest.Spec.Version != "v9.9.9" {
		t.Errorf("make dist's manifest: version %s, platforms %v; want v9.9.9, %v", manifest.Spec.Version, got, allPlatforms)
	}
	if !strings.Contains(stderr.String(), "no license file") {
		t.Errorf("a repository without a license file is not warned about:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "not a release version") || strings.Contains(stderr.String(), "uncommitted") {
		t.Errorf("VERSION v9.9.9 is warned about:\n%s", stderr.String())
	}
}

// TestREADME: the README's install commands name what make dist writes.
func TestREADME(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	must(t, err)
	for _, want := range []string{
		"make dist",
		"kubectl krew install --manifest=dist/" + ManifestPath + " --archive=dist/" + ArchiveName("VERSION", Platform{"OS", "ARCH"}),
		"dist/" + SumsFile,
		"DIST_URL_BASE",
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}

// TestRunWarns: what the tool says of a development VERSION, and that it
// packs the repository's license file when there is one.
func TestRunWarns(t *testing.T) {
	o := goodRelease(t, "c3aacbc-dirty", false)
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "LICENSE"), []byte("the license\n"), 0o644))
	var stdout, stderr bytes.Buffer
	args := []string{"-version", o.Version, "-url-base", o.URLBase, "-bins", o.Bins, "-out", o.Out, "-root", root}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, want := range []string{"not a release version", "the manifest says v0.0.0-dev+c3aacbc-dirty", "uncommitted changes"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "no license file") {
		t.Errorf("warned of a missing license file beside %s", filepath.Join(root, "LICENSE"))
	}
	if _, ok := readArchive(t, filepath.Join(o.Out, ArchiveName(o.Version, allPlatforms[0])))["LICENSE"]; !ok {
		t.Error("the archive lacks the repository's LICENSE")
	}
	if !strings.Contains(stdout.String(), "kubectl krew install --manifest="+filepath.Join(o.Out, ManifestPath)) {
		t.Errorf("stdout does not say how to install:\n%s", stdout.String())
	}
}
