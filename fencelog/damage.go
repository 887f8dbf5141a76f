package fencelog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
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
	freelist uint64 // the freelist's page, or noFreelist
	pgid     uint64 // the high-water mark: pages in use
	txid     uint64
}

// A freelist page's flag in its page header, and the freelist page id of a
// store that does not keep one.
const (
	freelistPageFlag = 0x10
	noFreelist       = ^uint64(0)
)

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
	return boltMeta{pageSize: le.Uint32(b[8:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}, true
}

// checkFile compares the file's length with the pages its newest valid
// meta page says are in use, and checks that the page that meta page names
// as the freelist is one. bbolt maps the file and would crash (SIGBUS) on
// reading a page past its end, and panics while it opens a store for
// writing whose freelist page is damaged; this says what is wrong instead.
// It leaves every other problem to bbolt and walk.
func checkFile(path string, size int64) error {
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
	if best.freelist != noFreelist {
		h := make([]byte, pageHeaderSize)
		_, err := f.ReadAt(h, int64(best.freelist)*int64(best.pageSize))
		if id, flags := binary.LittleEndian.Uint64(h), binary.LittleEndian.Uint16(h[8:]); err != nil || id != best.freelist || flags&freelistPageFlag == 0 {
			return fmt.Errorf("%w: %s: page %d, which its last commit names as its list of free pages, is not one: the file was overwritten or corrupted", ErrDamaged, path, best.freelist)
		}
	}
	return nil
}

// damaged tells bbolt's errors about a file it cannot read.
func damaged(err error) bool {
	return errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrVersionMismatch) ||
		errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrInvalidMapping)
}

// walk reads every bucket and key of the store and decodes every scope
// record, so that a damaged page is found at start, with a message,
// rather than by a crash of a running gateway: bbolt panics on some
// damaged pages, which walk turns into ErrDamaged.
func walk(db *bolt.DB, path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrDamaged, path, r)
		}
	}()
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return walkBucket(b, bytes.Equal(name, bucketScopes))
		})
	})
	if err != nil && !errors.Is(err, ErrDamaged) {
		err = fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	return err
}

func walkBucket(b *bolt.Bucket, scopes bool) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return walkBucket(nb, false)
			}
			return nil
		}
		if scopes {
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("the record of scope %q cannot be read: %v", k, err)
			}
		}
		return nil
	})
}
