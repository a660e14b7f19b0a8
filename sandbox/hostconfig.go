package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxConfigSize bounds a config file art reads (binds.json, policy.json).
const maxConfigSize = 1 << 20

// ConfigPath returns WORKSPACE/.art/config/NAME after checking that .art
// and .art/config are real directories. An agent's work can put a .art
// symbolic link into a workspace that has no .art directory of its own
// (the repository found in a parent, or given with -d), and art must never
// take its config from what the link points at. A missing directory is no
// error: the caller then finds no file.
func ConfigPath(workspace, name string) (string, error) {
	dir := filepath.Join(workspace, ".art")
	for _, d := range []string{dir, filepath.Join(dir, "config")} {
		st, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("config directory %s: %w", d, err)
		}
		if !st.IsDir() {
			return "", fmt.Errorf("%s is not a directory (%s): art reads its config only from a real directory; remove it (an agent's session may have left it)", d, st.Mode().Type())
		}
	}
	return filepath.Join(dir, "config", name), nil
}

// ReadConfigFile reads a config file that must be a regular file (never
// followed through a link, never a fifo or device that would block or never
// end) of at most 1 MiB. A missing file returns nil data and no error.
func ReadConfigFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("read %s: it is a symbolic link; art reads config only from a regular file (replace the link with the file)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file (%s); art reads config only from a regular file", path, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("read %s: larger than %d bytes; a config file is a short JSON document", path, maxConfigSize)
	}
	return data, nil
}
