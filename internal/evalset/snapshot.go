package evalset

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// snapshot reads a files: source once, at Load, so that nothing read later
// (fingerprints, copies into sandboxes) can follow a symlink swapped in after
// validation. The file is opened without following a final symlink, and the
// path the kernel reports for the open file must still lie inside the eval
// set directory: a component swapped for a symlink between the check and
// the open is caught as well.
func (v *validator) snapshot(abs string) error {
	if _, ok := v.es.snap[abs]; ok {
		return nil
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	if opened, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil {
		if rel, err := filepath.Rel(v.realDir, opened); err != nil || rel == ".." || strings.HasPrefix(filepath.ToSlash(rel), "../") {
			return errors.New("changed into a link out of the eval set directory while it was read")
		}
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errors.New("is not a regular file")
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if v.es.snap == nil {
		v.es.snap = map[string]snapFile{}
	}
	v.es.snap[abs] = snapFile{data: data, mode: int64(st.Mode().Perm())}
	return nil
}
