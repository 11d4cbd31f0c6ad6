// Command image builds restart-controller's OCI image without a Docker engine:
// the static binaries (the controller and its kubectl plugin) on an empty base (FROM scratch) with /etc/passwd,
// /etc/group, CA certificates and the IANA time zones (/usr/share/zoneinfo,
// from the building Go's database), run as 65532:65532 ("nonroot"). It writes an
// OCI image layout and a tarball that `docker load` and `podman load` accept,
// and prints the image digest.
//
//	go -C hack/image run . [-version v1.2.3] [-layout bin/image] [-tar bin/restart-controller-image.tar]
//
// Builds are reproducible: every time in the image is SOURCE_DATE_EPOCH, or
// the time of the last commit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	root := fs.String("root", "", "repository root (default: found from the working directory)")
	version := fs.String("version", "", "version stamped into the binary and the image (default: git describe --tags --always --dirty)")
	revision := fs.String("revision", "", "git commit for org.opencontainers.image.revision (default: HEAD)")
	arch := fs.String("arch", "amd64", "GOARCH of the binary and the image")
	binary := fs.String("binary", "", "use this prebuilt static controller binary instead of building one (it must carry -version)")
	pluginBinary := fs.String("plugin-binary", "", "use this prebuilt static kubectl-restart_controller instead of building one (it must carry -version)")
	certs := fs.String("ca-certificates", "", "PEM bundle to copy in (default: the host's "+CACertificates+"; - for none)")
	layoutDir := fs.String("layout", "bin/image", "OCI image layout folder to write, relative to the root (empty: none)")
	tarPath := fs.String("tar", "bin/restart-controller-image.tar", "docker-loadable tarball to write, relative to the root (empty: none)")
	repo := fs.String("repository", "ghcr.io/restart-controller/restart-controller", "repository the tarball's tag names")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if *root == "" {
		if *root, err = moduleRoot(); err != nil {
			return err
		}
	}
	if *version == "" {
		*version = gitOr(*root, "dev", "describe", "--tags", "--always", "--dirty")
	}
	if *revision == "" {
		*revision = gitOr(*root, "unknown", "rev-parse", "HEAD")
	}
	created, err := createdTime(*root)
	if err != nil {
		return err
	}
	img, err := Build(ctx, Options{
		Root: *root, Version: *version, Revision: *revision, Created: created,
		Arch: *arch, Binary: *binary, PluginBinary: *pluginBinary, CACertificates: *certs,
	})
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		dir := inRoot(*root, *layoutDir)
		if err := WriteLayout(dir, img, *version); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "image: OCI layout", dir)
	}
	if *tarPath != "" {
		path := inRoot(*root, *tarPath)
		tag, err := name.NewTag(*repo + ":" + tagFor(*version))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "image: tarball %s (docker load -i %s; tag %s)\n", path, path, tag)
	}
	fmt.Println(digest)
	return nil
}

// WriteLayout replaces dir with an OCI image layout holding img alone,
// annotated with its version as org.opencontainers.image.ref.name.
func WriteLayout(dir string, img v1.Image, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tagFor(version),
	}))
}

// tagFor turns a version into a valid tag: letters, digits, '_', '.', '-'.
func tagFor(version string) string {
	var b strings.Builder
	for _, r := range version {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.TrimLeft(b.String(), ".-")
	if s == "" {
		return "dev"
	}
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

// createdTime is SOURCE_DATE_EPOCH when set, else the last commit's time.
func createdTime(root string) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	if s := gitOr(root, "", "log", "-1", "--format=%ct"); s != "" {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0).UTC(), nil
		}
	}
	return time.Unix(0, 0).UTC(), nil
}

func gitOr(dir, fallback string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if s := strings.TrimSpace(string(out)); err == nil && s != "" {
		return s
	}
	return fallback
}

func inRoot(root, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(root, path)
}

// moduleRoot is the repository root: this tool is the module at hack/image,
// whose go.mod the go command names.
func moduleRoot() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	return filepath.Dir(filepath.Dir(filepath.Dir(strings.TrimSpace(string(gomod))))), err
}
