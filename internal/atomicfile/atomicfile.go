// Package atomicfile writes a file so that readers see either its old
// contents or the whole new ones, never a part.
//
// The new contents go to a temporary file beside the target, which is synced
// and renamed over it. Only a regular file (or a path that does not exist
// yet) is ever replaced: a device, a pipe, a socket or a directory is
// refused before anything is written. A symbolic link is written through:
// the file it points to is replaced and the link stays. Temporary files in
// progress are registered, so that Cleanup can remove them when the process
// is interrupted.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"hybrid/internal/filekind"
)

// ErrNotRegular is wrapped by the error Create returns for a target that
// exists and is not a regular file (after following symbolic links).
var ErrNotRegular = errors.New("not a regular file")

// maxLinks bounds how many symbolic links Create follows, as the kernel's
// ELOOP does (Linux gives up after 40).
const maxLinks = 40

// File is a file being written atomically. Write to it, then Commit to put it
// in place, or Abort to drop it. A File is not safe for concurrent use, but
// Cleanup may run beside it.
type File struct {
	tmp    *os.File
	name   string      // the temporary file's path
	target string      // the path it is renamed to: the given one, links followed
	path   string      // the path Create was given, for errors
	mode   os.FileMode // the replaced file's mode, kept
	keep   bool        // whether there is a file to replace
	done   bool
}

// inProgress is every File not yet committed or aborted, for Cleanup.
var inProgress = struct {
	sync.Mutex
	files map[*File]struct{}
}{files: map[*File]struct{}{}}

// Create starts writing path atomically. It refuses, with an error wrapping
// ErrNotRegular, a path that exists and is not a regular file, and follows a
// symbolic link to the file it names. The temporary file is made beside that
// file; a new file gets mode perm less the umask, a replaced one keeps its
// mode.
func Create(path string, perm os.FileMode) (*File, error) {
	if path == "" {
		return nil, &fs.PathError{Op: "create", Path: path, Err: fs.ErrInvalid}
	}
	target, fi, err := resolve(path)
	if err != nil {
		return nil, err
	}
	f := &File{target: target, path: path}
	if fi != nil {
		f.mode, f.keep = fi.Mode().Perm(), true
	}
	dir, base := filepath.Dir(target), filepath.Base(target)
	inProgress.Lock()
	defer inProgress.Unlock()
	for range 100 {
		f.name = filepath.Join(dir, "."+base+".tmp-"+suffix())
		// O_EXCL: the name is ours alone. Made with perm, the file gets the
		// umask applied as any new file does.
		f.tmp, err = os.OpenFile(f.name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm.Perm())
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	// Registered under the same lock that covered the create, so Cleanup
	// cannot run between the two and miss the file.
	inProgress.files[f] = struct{}{}
	return f, nil
}

// Check says whether path could be written by Create: an error if it
// exists (through any symbolic links) and is not a regular file. Commands
// that work a long time before writing call it first, so that a bad -o is
// refused at once rather than after the work.
func Check(path string) error {
	if path == "" {
		return &fs.PathError{Op: "create", Path: path, Err: fs.ErrInvalid}
	}
	_, _, err := resolve(path)
	return err
}

// resolve follows symbolic links from path to the file a write should
// replace, and returns it with its FileInfo (nil if it does not exist yet).
// It is filepath.EvalSymlinks for the last element, except that a link to a
// file not yet made resolves to that file (as a shell's > would create it).
func resolve(path string) (string, fs.FileInfo, error) {
	p := path
	for range maxLinks {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		switch {
		case fi.Mode().IsRegular():
			return p, fi, nil
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return "", nil, err
			}
			if !filepath.IsAbs(link) {
				link = filepath.Join(filepath.Dir(p), link)
			}
			p = link
		default:
			name := path
			if p != path {
				name = fmt.Sprintf("%s (a link to %s)", path, p)
			}
			return "", nil, fmt.Errorf("refusing to replace %s: it is %s, %w", name, filekind.Of(fi.Mode()), ErrNotRegular)
		}
	}
	return "", nil, &fs.PathError{Op: "resolve", Path: path, Err: fmt.Errorf("more than %d symbolic links", maxLinks)}
}

func suffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Name returns the temporary file's path.
func (f *File) Name() string { return f.name }

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	if f.done {
		return 0, fmt.Errorf("write %s: %w", f.path, os.ErrClosed)
	}
	return f.tmp.Write(p)
}

// Commit syncs the temporary file, gives it the replaced file's mode if there
// was one, renames it over the target and syncs the folder. On any error the
// temporary file is removed and the target left as it was.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("commit %s: %w", f.path, os.ErrClosed)
	}
	f.done = true
	defer unregister(f)
	err := f.tmp.Sync()
	err = errors.Join(err, f.tmp.Close())
	if err == nil && f.keep {
		err = os.Chmod(f.name, f.mode)
	}
	if err == nil {
		// Something may have taken the target's place since Create.
		if fi, lerr := os.Lstat(f.target); lerr == nil && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			err = fmt.Errorf("refusing to replace %s: it is now %s, %w", f.target, filekind.Of(fi.Mode()), ErrNotRegular)
		}
	}
	if err == nil {
		err = os.Rename(f.name, f.target)
	}
	if err != nil {
		os.Remove(f.name)
		return err
	}
	syncDir(filepath.Dir(f.target))
	return nil
}

// Abort closes and removes the temporary file, leaving the target as it was.
// It does nothing after Commit or Abort.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	defer unregister(f)
	cerr := f.tmp.Close()
	rerr := os.Remove(f.name)
	if errors.Is(rerr, fs.ErrNotExist) { // Cleanup was first
		rerr = nil
	}
	return errors.Join(cerr, rerr)
}

func unregister(f *File) {
	inProgress.Lock()
	delete(inProgress.files, f)
	inProgress.Unlock()
}

// Cleanup removes the temporary file of every File not yet committed or
// aborted, and returns how many it removed. It is meant for a signal handler
// about to exit the process: it is safe to call from any goroutine while the
// Files are in use, whose later Commit then fails (and Abort succeeds).
func Cleanup() int {
	inProgress.Lock()
	defer inProgress.Unlock()
	n := 0
	for f := range inProgress.files {
		// Removing the name is enough: a writer still holding the file
		// writes into an unlinked inode, freed when it is closed or the
		// process exits.
		if os.Remove(f.name) == nil {
			n++
		}
		delete(inProgress.files, f)
	}
	return n
}

// Write writes b to path atomically, as Create, Write and Commit do: a
// target that is not a regular file is refused, a symbolic link is written
// through, an existing file keeps its mode and a new one gets perm less the
// umask. If anything fails, the temporary file is removed and path is left
// as it was.
func Write(path string, b []byte, perm os.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// syncDir makes the rename durable where the platform allows it; it is best
// effort, as some systems cannot sync a folder.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
