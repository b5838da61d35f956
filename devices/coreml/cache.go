package coreml

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"hybrid/internal/atomicfile"
)

// CacheDirEnv names the environment variable that overrides where compiled
// models are kept (default: os.UserCacheDir()/hybrid/coreml).
const CacheDirEnv = "HYBRID_COREML_CACHE"

// cacheDir returns the directory compiled models are kept in.
func cacheDir() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("coreml: no cache directory (set %s): %w", CacheDirEnv, err)
	}
	return filepath.Join(d, "hybrid", "coreml"), nil
}

// cache keeps compiled models as <dir>/<key>.mlmodelc. A compiled model
// appears there whole or not at all (it is renamed into place), so its
// existence is the test of a hit, and processes that compile the same key at
// once both succeed.
type cache struct{ dir string }

// compiled returns the path of key's compiled model, compiling it on a miss:
// model makes the .mlmodel bytes, which are written to <dir>/<key>.mlmodel
// atomically, compile turns that file into a compiled model directory
// (anywhere), which is then moved into place. The .mlmodel is removed after:
// it is as large as its weights and can be made again.
func (c cache) compiled(key string, model func() ([]byte, error), compile func(src string) (string, error)) (string, error) {
	dst := filepath.Join(c.dir, key+".mlmodelc")
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		return dst, nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return "", fmt.Errorf("coreml: cache: %w", err)
	}
	b, err := model()
	if err != nil {
		return "", err
	}
	src := filepath.Join(c.dir, key+".mlmodel")
	if err := writeFileAtomic(src, b); err != nil {
		return "", err
	}
	defer os.Remove(src)
	out, err := compile(src)
	if err != nil {
		return "", fmt.Errorf("coreml: compile %s: %w", src, err)
	}
	if err := installDir(out, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// writeFileAtomic writes data to path with internal/atomicfile: through a
// temporary file beside it, synced and then renamed over path.
func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("coreml: write %s: %w", path, err)
	}
	return nil
}

// installDir moves the directory src to dst atomically. If dst already
// exists (another process installed the same key), src is dropped. Across
// file systems (CoreML compiles into the system's temporary directory), src
// is copied to a temporary sibling of dst which is then renamed.
func installDir(src, dst string) error {
	err := os.Rename(src, dst)
	if err == nil {
		return nil
	}
	if fi, serr := os.Stat(dst); serr == nil && fi.IsDir() {
		os.RemoveAll(src)
		return nil
	}
	if !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("coreml: install %s: %w", dst, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("coreml: install %s: %w", dst, err)
	}
	if err := copyTree(src, tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("coreml: install %s: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		if fi, serr := os.Stat(dst); serr == nil && fi.IsDir() {
			os.RemoveAll(src)
			return nil
		}
		return fmt.Errorf("coreml: install %s: %w", dst, err)
	}
	os.RemoveAll(src)
	return nil
}

// copyTree copies the directories and regular files under src into the
// existing directory dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if rel == "." {
				return nil
			}
			return os.Mkdir(to, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, to)
		}
		return fmt.Errorf("%s is neither a file nor a directory", path)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
