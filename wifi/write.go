package wifi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CAPath is where Write puts the CA file of the configuration at conf:
// beside it, its name without .conf and with -ca.pem
// (wpa_supplicant-wlan0.conf: wpa_supplicant-wlan0-ca.pem).
func CAPath(conf string) string {
	return strings.TrimSuffix(conf, ".conf") + "-ca.pem"
}

// Write writes the network's wpa_supplicant configuration to path, and
// ca (LoadCA's) to CAPath(path), or removes a CA file left there by an
// earlier network that had one. Each file is written whole with mode 0600
// (it holds the network's key or password) to a temporary file beside it,
// synced and renamed over the old one: wpa_supplicant, or a power cut,
// finds the old file or the new one, never half of one. The CA goes
// first, so that no configuration names a CA file not yet there.
func (n *Network) Write(path string, ca []byte) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	caPath := CAPath(abs)
	cfg, err := n.Config(caPath)
	if err != nil {
		return err
	}
	if n.Security == Enterprise {
		if len(ca) == 0 {
			return fmt.Errorf("wifi: a WPA2-Enterprise network without its CA file")
		}
		if err := writeAtomic(caPath, ca); err != nil {
			return err
		}
	}
	if err := writeAtomic(abs, cfg); err != nil {
		return err
	}
	if n.Security != Enterprise {
		if err := os.Remove(caPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Remove removes the configuration at path and its CA file (CAPath), as
// for a wifi.txt that turns Wi-Fi off, the configuration first (no
// configuration names a CA file already gone), and syncs the directory.
// It returns the paths it removed; none there (nor their directory) is no
// error.
func Remove(path string) ([]string, error) {
	var removed []string
	for _, p := range []string{path, CAPath(path)} {
		err := os.Remove(p)
		switch {
		case err == nil:
			removed = append(removed, p)
		case !errors.Is(err, fs.ErrNotExist):
			return removed, err
		}
	}
	if len(removed) == 0 {
		return nil, nil
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return removed, err
	}
	defer d.Close()
	return removed, d.Sync()
}

// writeAtomic replaces path with data, mode 0600, through a synced
// temporary file and a rename, and syncs the directory.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		// Named by the directory, not by a temporary name nobody chose.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s: %w", dir, pe.Err)
		}
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
