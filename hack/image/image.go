package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts. The Dockerfile describes the same image on top of
// distroless/static:nonroot; dockerfile_test.go keeps the two in agreement.
const (
	User       = "65532:65532"
	BinaryPath = "/restart-controller"
	// PluginPath is the operator CLI (explain, check), a binary of its own so
	// that the controller's stays lean; it runs in the pod with
	// kubectl exec ... -- /kubectl-restart_controller check.
	PluginPath  = "/kubectl-restart_controller"
	MetricsPort = "10254/tcp"
	Title       = "restart-controller"
	Source      = "https://github.com/restart-controller/restart-controller"
	// CACertificates is where Go's crypto/x509 looks first on Linux.
	CACertificates = "/etc/ssl/certs/ca-certificates.crt"
	// ZoneInfo is where Go's time package looks first on Linux for the
	// IANA time zones of restart windows (restartWindows[].timeZone), as
	// distroless/static has them.
	ZoneInfo = "/usr/share/zoneinfo"
)

// Options say what to build. Zero values are filled in by Build.
type Options struct {
	Root     string // repository root (folder of the controller's go.mod)
	Version  string // -X main.version and org.opencontainers.image.version
	Revision string // git commit, org.opencontainers.image.revision
	// Created is the image's creation time and the time of every file in it;
	// a fixed one (SOURCE_DATE_EPOCH or the commit time) makes builds reproducible.
	Created time.Time
	Arch    string // GOARCH of the binary and the image, default amd64
	// Binary is a prebuilt static controller binary; empty builds one from Root.
	Binary string
	// PluginBinary is a prebuilt static kubectl-restart_controller; empty
	// builds one from Root.
	PluginBinary string
	// CACertificates is a PEM bundle copied into the image; empty uses the
	// host's /etc/ssl/certs/ca-certificates.crt if there is one, "-" none.
	CACertificates string
}

// Labels are the image's OCI annotations-as-labels.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    Title,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
	}
}

// Build compiles the controller and the operator CLI (unless Options.Binary
// and Options.PluginBinary name them) and assembles a FROM-scratch image: a
// base layer with /etc/passwd, /etc/group, the non-root home and CA
// certificates, and a layer with the two binaries.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	dir, err := os.MkdirTemp("", "restart-controller-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	read := func(prebuilt, pkg string) ([]byte, error) {
		if prebuilt == "" {
			prebuilt = filepath.Join(dir, filepath.Base(pkg))
			if err := BuildBinary(ctx, o.Root, o.Version, o.Arch, pkg, prebuilt); err != nil {
				return nil, err
			}
		}
		return os.ReadFile(prebuilt)
	}
	bin, err := read(o.Binary, ControllerPackage)
	if err != nil {
		return nil, err
	}
	plugin, err := read(o.PluginBinary, PluginPackage)
	if err != nil {
		return nil, err
	}
	certs, err := readCerts(o.CACertificates)
	if err != nil {
		return nil, err
	}
	zones, err := readZoneInfo(ctx)
	if err != nil {
		return nil, err
	}
	return Assemble(o, bin, plugin, certs, zones)
}

// readZoneInfo reads the time zone database of the Go that builds the
// binaries ($GOROOT/lib/time/zoneinfo.zip): a release's tzdata, the same on
// every machine that builds with that Go, so the image stays reproducible.
func readZoneInfo(ctx context.Context) ([]byte, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("finding GOROOT for its time zone database: %w", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the time zone database: %w", err)
	}
	return b, nil
}

// zoneEntries are the zones of a zoneinfo.zip as files under ZoneInfo, with
// the folders they need.
func zoneEntries(db []byte) ([]entry, error) {
	r, err := zip.NewReader(bytes.NewReader(db), int64(len(db)))
	if err != nil {
		return nil, fmt.Errorf("reading the time zone database: %w", err)
	}
	root := strings.TrimPrefix(ZoneInfo, "/") + "/"
	dirs := map[string]bool{"usr/": true, "usr/share/": true, root: true}
	var out []entry
	for _, f := range r.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("reading zone %s: %w", f.Name, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("reading zone %s: %w", f.Name, err)
		}
		out = append(out, entry{name: root + f.Name, mode: 0o644, data: data})
		for dir := filepath.Dir(f.Name); dir != "."; dir = filepath.Dir(dir) {
			dirs[root+dir+"/"] = true
		}
	}
	for d := range dirs {
		out = append(out, entry{name: d, mode: 0o755, dir: true})
	}
	return out, nil
}

// The packages of the image's two binaries, relative to the root.
const (
	ControllerPackage = "./cmd/restart-controller"
	PluginPackage     = "./cmd/kubectl-restart_controller"
)

// BuildBinary runs the same build as `make build` for pkg, cross-compiled
// for linux/arch.
func BuildBinary(ctx context.Context, root, version, arch, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+version, "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return nil
}

func readCerts(path string) ([]byte, error) {
	switch path {
	case "-":
		return nil, nil
	case "":
		b, err := os.ReadFile(CACertificates)
		if os.IsNotExist(err) {
			fmt.Fprintf(os.Stderr, "image: no %s on this machine; the image has no CA certificates "+
				"(only TLS to the API server with its service account CA works)\n", CACertificates)
			return nil, nil
		}
		return b, err
	default:
		return os.ReadFile(path)
	}
}

// Assemble puts the binaries and the base files into an image. It is pure:
// the same inputs give the same digest. zoneinfo is a zoneinfo.zip (nil:
// no time zones but UTC).
func Assemble(o Options, binary, plugin, certs, zoneinfo []byte) (v1.Image, error) {
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	created := o.Created.UTC()
	uid, gid := 65532, 65532
	base := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: uid, gid: gid},
	}
	if len(certs) > 0 {
		base = append(base,
			entry{name: "etc/ssl/", mode: 0o755, dir: true},
			entry{name: "etc/ssl/certs/", mode: 0o755, dir: true},
			entry{name: strings.TrimPrefix(CACertificates, "/"), mode: 0o644, data: certs})
	}
	if len(zoneinfo) > 0 {
		zones, err := zoneEntries(zoneinfo)
		if err != nil {
			return nil, err
		}
		base = append(base, zones...)
	}
	app := []entry{
		{name: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, data: binary},
		{name: strings.TrimPrefix(PluginPath, "/"), mode: 0o755, data: plugin},
	}

	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: o.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:         User,
			Entrypoint:   []string{BinaryPath},
			ExposedPorts: map[string]struct{}{MetricsPort: {}},
			WorkingDir:   "/",
			Labels:       o.Labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range []struct {
		files []entry
		by    string
	}{
		{base, "restart-controller base: passwd, group, home of nonroot (65532), CA certificates, time zones"},
		{app, "restart-controller " + o.Version + " static binaries: the controller and kubectl-restart_controller"},
	} {
		layer, err := tarLayer(l.files, created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: l.by},
		})
		if err != nil {
			return nil, err
		}
	}
	return img, nil
}

type entry struct {
	name     string
	mode     int64
	dir      bool
	uid, gid int
	data     []byte
}

// tarLayer writes the entries, in name order with fixed times and owners, as
// a gzip-compressed OCI layer. The gzip stream carries no time or name, so
// equal files give an equal digest.
func tarLayer(files []entry, mtime time.Time) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: mtime,
			Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data)),
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := raw.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
