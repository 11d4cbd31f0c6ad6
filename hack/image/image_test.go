package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const testVersion = "v0.0.0-imagetest"

var testCreated = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// built is the image the tests share: building the binary is the slow part.
var built struct {
	layoutDir string
	tarPath   string
	opts      Options
}

func TestMain(m *testing.M) {
	code, err := setUp()
	if err != nil {
		os.Stderr.WriteString("image test set-up: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(code(m))
}

func setUp() (func(*testing.M) int, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "image-test-")
	if err != nil {
		return nil, err
	}
	built.opts = Options{Root: root, Version: testVersion, Revision: "0123456789abcdef", Created: testCreated,
		Arch: runtime.GOARCH}
	img, err := Build(context.Background(), built.opts)
	if err != nil {
		return nil, err
	}
	built.layoutDir = filepath.Join(dir, "layout")
	if err := WriteLayout(built.layoutDir, img, testVersion); err != nil {
		return nil, err
	}
	built.tarPath = filepath.Join(dir, "image.tar")
	if err := tarball.WriteToFile(built.tarPath, name.MustParseReference("restart-controller:"+testVersion), img); err != nil {
		return nil, err
	}
	return func(m *testing.M) int {
		defer os.RemoveAll(dir)
		return m.Run()
	}, nil
}

// openLayout reads the image back the way a registry client or a runtime
// would: from the OCI layout on disk, not from the value Build returned.
func openLayout(t *testing.T) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(built.layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("layout holds %d manifests, want 1", len(m.Manifests))
	}
	if got := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != testVersion {
		t.Errorf("ref.name annotation %q, want %q", got, testVersion)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestImageConfig(t *testing.T) {
	img := openLayout(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (numeric, so runAsNonRoot can verify it)", c.User)
	}
	if strings.Join(c.Entrypoint, " ") != "/restart-controller" || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/restart-controller] and no cmd", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["10254/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want only 10254/tcp", c.ExposedPorts)
	}
	want := map[string]string{
		"org.opencontainers.image.title":    "restart-controller",
		"org.opencontainers.image.source":   "https://github.com/restart-controller/restart-controller",
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": "0123456789abcdef",
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, c.Labels[k], v)
		}
	}
	if len(c.Labels) != len(want) {
		t.Errorf("labels %v, want exactly %v", c.Labels, want)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !cf.Created.Time.Equal(testCreated) {
		t.Errorf("created %s, want the fixed %s", cf.Created.Time, testCreated)
	}
	for i, h := range cf.History {
		if !h.Created.Time.Equal(testCreated) {
			t.Errorf("history[%d] created %s, want %s", i, h.Created.Time, testCreated)
		}
	}
	mt, err := img.MediaType()
	if err != nil || mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %q (%v), want OCI", mt, err)
	}
}

// TestImageRunsVersion extracts the binary from the image's layers and runs it.
func TestImageRunsVersion(t *testing.T) {
	files := extract(t, openLayout(t))
	bin, ok := files["restart-controller"]
	if !ok {
		t.Fatalf("no /restart-controller in the image; files: %v", names(files))
	}
	if bin.hdr.Mode&0o111 == 0 || bin.hdr.Uid != 0 {
		t.Errorf("/restart-controller mode %o uid %d, want executable, owned by root (not writable by 65532)",
			bin.hdr.Mode, bin.hdr.Uid)
	}
	path := filepath.Join(t.TempDir(), "restart-controller")
	if err := os.WriteFile(path, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", path, err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "restart-controller "+testVersion; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
	// Static: a FROM-scratch image has no dynamic loader.
	if bytes.Contains(bin.data, []byte("/lib64/ld-linux")) || bytes.Contains(bin.data, []byte("/lib/ld-linux")) {
		t.Error("the binary names a dynamic loader; it must be built with CGO_ENABLED=0")
	}
}

// TestImagePlugin runs the operator CLI the image ships beside the controller.
func TestImagePlugin(t *testing.T) {
	files := extract(t, openLayout(t))
	bin, ok := files[strings.TrimPrefix(PluginPath, "/")]
	if !ok {
		t.Fatalf("no %s in the image; files: %v", PluginPath, names(files))
	}
	if bin.hdr.Mode&0o111 == 0 || bin.hdr.Uid != 0 {
		t.Errorf("%s mode %o uid %d, want executable, owned by root", PluginPath, bin.hdr.Mode, bin.hdr.Uid)
	}
	path := filepath.Join(t.TempDir(), "kubectl-restart_controller")
	if err := os.WriteFile(path, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kubectl restart-controller explain KIND/NAME") {
		t.Fatalf("%s --help: %v\n%s", path, err, out)
	}
	if bytes.Contains(bin.data, []byte("/lib64/ld-linux")) || bytes.Contains(bin.data, []byte("/lib/ld-linux")) {
		t.Error("the plugin names a dynamic loader; it must be built with CGO_ENABLED=0")
	}
}

func TestImageBaseFiles(t *testing.T) {
	files := extract(t, openLayout(t))
	passwd := string(files["etc/passwd"].data)
	if !strings.Contains(passwd, "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", passwd)
	}
	if group := string(files["etc/group"].data); !strings.Contains(group, "\nnonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot group 65532:\n%s", group)
	}
	home, ok := files["home/nonroot"]
	if !ok || home.hdr.Uid != 65532 || home.hdr.Gid != 65532 {
		t.Errorf("/home/nonroot missing or not owned by 65532: %+v", home.hdr)
	}
	if host, err := os.ReadFile(CACertificates); err == nil {
		if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, host) {
			t.Error("the image's CA bundle differs from the host's")
		}
	}
	for n, f := range files {
		if !f.hdr.ModTime.Equal(testCreated) {
			t.Errorf("%s has mtime %s, want the fixed %s", n, f.hdr.ModTime, testCreated)
		}
	}
}

// The image has the IANA time zones restart windows name, where Go looks
// for them (a FROM-scratch image has none: LoadLocation would fail and the
// controller exit 2 on a window's timeZone).
func TestImageTimeZones(t *testing.T) {
	files := extract(t, openLayout(t))
	for _, zone := range []string{"Europe/Berlin", "America/Argentina/Buenos_Aires", "UTC"} {
		f, ok := files[strings.TrimPrefix(ZoneInfo, "/")+"/"+zone]
		if !ok {
			t.Errorf("no %s/%s in the image", ZoneInfo, zone)
			continue
		}
		if _, err := time.LoadLocationFromTZData(zone, f.data); err != nil {
			t.Errorf("%s: %v", zone, err)
		}
	}
}

// TestDockerTarball checks the docker-loadable tarball holds the same image.
func TestDockerTarball(t *testing.T) {
	tag := name.MustParseReference("restart-controller:" + testVersion).(name.Tag)
	fromTar, err := tarball.ImageFromPath(built.tarPath, &tag)
	if err != nil {
		t.Fatal(err)
	}
	a, err := fromTar.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	b, err := openLayout(t).ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("tarball config %s, layout config %s", a, b)
	}
}

func TestReproducible(t *testing.T) {
	bin := []byte("not really a binary")
	digest := func(o Options) v1.Hash {
		img, err := Assemble(o, bin, []byte("not really a plugin"), []byte("certs"), nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	o := built.opts
	first, second := digest(o), digest(o)
	if first != second {
		t.Fatalf("same inputs, digests %s and %s", first, second)
	}
	o.Created = o.Created.Add(time.Second)
	if digest(o) == first {
		t.Error("a different creation time gave the same digest")
	}
}

type file struct {
	hdr  *tar.Header
	data []byte
}

func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = file{h, data}
	}
}

func names(files map[string]file) []string {
	var out []string
	for n := range files {
		out = append(out, n)
	}
	return out
}
