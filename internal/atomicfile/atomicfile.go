// Package atomicfile writes a file so that readers see either its old
// contents or the whole new ones, never a part.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// Write writes b to path through a temporary file in the same folder (a
// rename is atomic only within one file system), synced to disk before it
// is renamed into place with mode perm. If anything fails, the temporary
// file is removed and path is left as it was.
func Write(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if werr == nil {
		werr = tmp.Sync()
	}
	err = errors.Join(werr, tmp.Close())
	if err == nil {
		// CreateTemp makes the file 0600 whatever perm is wanted.
		err = os.Chmod(tmp.Name(), perm)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// syncDir makes the rename durable where the platform allows it; it is best
// effort, as some systems cannot sync a folder.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
