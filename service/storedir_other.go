//go:build !linux

package service

import (
	"os"
)

func unfitFilesystem(string) string    { return "" }
func volatileFilesystem(string) string { return "" }

// writable tries what the store needs: a file created in dir.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".fencegate-check-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}
