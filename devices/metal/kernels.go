package metal

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// kernelFiles holds the MSL kernels: common.h, included by every .metal file.
//
//go:embed kernels/common.h kernels/*.metal
var kernelFiles embed.FS

// commonInclude is the line by which every .metal file includes common.h.
const commonInclude = `#include "common.h"`

// Source is every kernel's MSL, concatenated, as newLibraryWithSource
// compiles it: kernels/common.h, then each kernels/*.metal file in name order
// with its include of common.h blanked (newLibraryWithSource has no files to
// include from). #line directives keep the compiler's messages pointing at
// the file and line the kernel is written in.
var Source = mustSource(kernelFiles)

func mustSource(fsys fs.FS) string {
	s, err := buildSource(fsys, "kernels")
	if err != nil {
		// The files are embedded: a failure here is a broken build.
		panic(err)
	}
	return s
}

// buildSource concatenates dir/common.h and dir/*.metal.
func buildSource(fsys fs.FS, dir string) (string, error) {
	var b strings.Builder
	common, err := fs.ReadFile(fsys, path.Join(dir, "common.h"))
	if err != nil {
		return "", fmt.Errorf("metal: kernel source: %w", err)
	}
	fmt.Fprintf(&b, "#line 1 \"common.h\"\n%s\n", common)
	names, err := fs.Glob(fsys, path.Join(dir, "*.metal"))
	if err != nil {
		return "", fmt.Errorf("metal: kernel source: %w", err)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("metal: kernel source: no .metal files in %s", dir)
	}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return "", fmt.Errorf("metal: kernel source: %w", err)
		}
		text := string(src)
		if !strings.Contains(text, commonInclude) {
			return "", fmt.Errorf("metal: kernel source %s does not include common.h", name)
		}
		// Blank the line rather than delete it, so #line stays true.
		text = strings.Replace(text, commonInclude, "// (common.h is above)", 1)
		fmt.Fprintf(&b, "#line 1 %q\n%s\n", path.Base(name), text)
	}
	return b.String(), nil
}
