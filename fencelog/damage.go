package fencelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged is returned by Open for a store file that bbolt cannot read:
// truncated (shorter than the pages its last commit uses), or not a valid
// bbolt file at all. A restart cannot repair it; an operator must restore
// it (see docs/design.md, "A damaged store").
var ErrDamaged = errors.New("fencelog: store file is damaged")

// bbolt's file format, version 2: two meta pages at the start, each a
// 16-byte page header and then the meta fields, in the machine's byte
// order (little-endian on every platform fencegate ships for).
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSize       = 64 // up to and including the checksum
)

type boltMeta struct {
	pageSize uint32
	pgid     uint64 // the high-water mark: pages in use
	txid     uint64
}

// parseMeta reads a meta page's fields; ok is false if its magic, version
// or checksum is wrong.
func parseMeta(b []byte) (boltMeta, bool) {
	if len(b) < metaSize {
		return boltMeta{}, false
	}
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != boltMagic || le.Uint32(b[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if h.Sum64() != le.Uint64(b[56:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(b[8:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}, true
}

// checkLength compares the file's length with the pages its newest valid
// meta page says are in use. bbolt maps the file and would crash (SIGBUS)
// on reading a page past its end; this says what is wrong instead. It
// leaves every other problem to bbolt.
func checkLength(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt says why
	}
	defer f.Close()
	first := make([]byte, pageHeaderSize+metaSize)
	if _, err := io.ReadFull(f, first); err != nil {
		return nil
	}
	m0, ok0 := parseMeta(first[pageHeaderSize:])
	if !ok0 {
		return nil
	}
	second := make([]byte, pageHeaderSize+metaSize)
	best := m0
	if _, err := f.ReadAt(second, int64(m0.pageSize)); err == nil {
		if m1, ok := parseMeta(second[pageHeaderSize:]); ok && m1.txid > m0.txid {
			best = m1
		}
	}
	if need := int64(best.pgid) * int64(best.pageSize); size < need {
		return fmt.Errorf("%w: %s has %d bytes, but its last commit uses %d: it was truncated (a full disk, a copy cut short)", ErrDamaged, path, size, need)
	}
	return nil
}

// damaged tells bbolt's errors about a file it cannot read.
func damaged(err error) bool {
	return errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrVersionMismatch) ||
		errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrInvalidMapping)
}
