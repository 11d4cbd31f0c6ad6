// Command dist packages the kubectl plugin's release, for `make dist`: for
// each platform a reproducible tar.gz holding kubectl-restart_controller
// (and the repository's license file, when it has one), a SHA256SUMS file,
// and the krew plugin manifest plugins/restart-controller.yaml, whose
// platforms download the archives from one URL base and check their sums.
// It then reads back what it wrote and checks it against krew's manifest
// rules and the archives themselves (Verify).
//
// The Makefile builds the binaries, with the same release flags as `make
// plugin`, into BINS/OS_ARCH/; this program only packages and checks them,
// so its tests run on fake binaries in seconds.
//
//	go run ./hack/dist -version v1.2.3 -url-base https://example.com/v1.2.3 \
//	  -platforms "linux/amd64 darwin/arm64" -bins bin/dist -out dist
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := fs.String("version", "", "the Makefile's VERSION, which the binaries carry (required)")
	urlBase := fs.String("url-base", "", "URL the archives are downloaded from, without the file name (required)")
	platforms := fs.String("platforms", "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64", "OS/ARCH pairs, separated by spaces or commas")
	bins := fs.String("bins", "bin/dist", "folder holding OS_ARCH/"+Binary+" for each platform")
	out := fs.String("out", "dist", "folder to replace with the archives, "+SumsFile+" and "+ManifestPath)
	root := fs.String("root", ".", "repository root, where a license file is looked for")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *v == "" || *urlBase == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "dist: -version and -url-base are required, and nothing else")
		return 2
	}
	ps, err := ParsePlatforms(*platforms)
	if err != nil {
		fmt.Fprintln(stderr, "dist: -platforms:", err)
		return 2
	}
	o := Options{Version: *v, URLBase: *urlBase, Bins: *bins, Out: *out, Platforms: ps}
	if o.License, err = findLicense(*root); err != nil {
		fmt.Fprintln(stderr, "dist:", err)
		return 1
	}
	if o.ModTime, err = sourceDate(*root); err != nil {
		fmt.Fprintln(stderr, "dist:", err)
		return 1
	}
	if err := Package(o); err != nil {
		fmt.Fprintln(stderr, "dist:", err)
		return 1
	}

	sums, err := os.ReadFile(filepath.Join(o.Out, SumsFile))
	if err != nil {
		fmt.Fprintln(stderr, "dist:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n%s\n", filepath.Join(o.Out, SumsFile), sums)
	manifest := filepath.Join(o.Out, ManifestPath)
	fmt.Fprintf(stdout, "krew manifest %s; try it with\n  kubectl krew install --manifest=%s --archive=%s\n",
		manifest, manifest, filepath.Join(o.Out, ArchiveName(o.Version, Platform{"linux", "amd64"})))
	if mv, release := ManifestVersion(o.Version); !release {
		fmt.Fprintf(stderr, "dist: VERSION %s is not a release version (vMAJOR.MINOR.PATCH); the manifest says %s. "+
			"Tag the commit to release it.\n", o.Version, mv)
	}
	if strings.HasSuffix(o.Version, "-dirty") {
		fmt.Fprintf(stderr, "dist: VERSION %s: built from a work tree with uncommitted changes.\n", o.Version)
	}
	if o.License == "" {
		fmt.Fprintln(stderr, "dist: the repository has no license file, so the archives hold none; "+
			"krew-index accepts a plugin only when its installation includes one (LICENSE, COPYING, ...).")
	}
	return 0
}

// licenseNames are the file names krew-index's validate-krew-manifest
// accepts as a license, compared without case.
var licenseNames = []string{"license", "license.txt", "license.md", "licenses", "licenses.txt", "licenses.md", "copying", "copying.txt"}

// findLicense returns the repository's license file, or "" when it has none.
func findLicense(root string) (string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", fmt.Errorf("looking for a license file: %w", err)
	}
	var found []string
	for _, e := range entries {
		for _, n := range licenseNames {
			if e.Type().IsRegular() && strings.EqualFold(e.Name(), n) {
				found = append(found, filepath.Join(root, e.Name()))
			}
		}
	}
	if len(found) > 1 {
		return "", fmt.Errorf("several license files, %q: keep one", found)
	}
	if len(found) == 0 {
		return "", nil
	}
	return found[0], nil
}

// sourceDate is SOURCE_DATE_EPOCH when set, else the last commit's time,
// as for the image (hack/image): the same commit gives the same archives.
func sourceDate(root string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		cmd := exec.Command("git", "log", "-1", "--format=%ct")
		cmd.Dir = root
		if out, err := cmd.Output(); err == nil {
			s = strings.TrimSpace(string(out))
		}
	}
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the source date %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
