// Package fencelog is fencegate's durable fence record: per fence scope, the
// highest (token, seq) admitted, the window of recently applied commands, the
// intended state of each actuator, and a bounded audit trail, kept in a bbolt
// file.
//
// # Safety
//
// [Store.Admit] compares a command with the scope's fence and, if it passes,
// records the new fence and the intended state in one bbolt read-write
// transaction whose commit is fsynced before Admit returns. A caller that
// drives an output only after Admit returned Applied therefore never drives
// an output whose fence is not on disk. The comparison inside that
// transaction is authoritative: the read-only fast path that answers stale
// and duplicate commands without writing can never admit anything.
//
// After a failed commit the Store refuses every further write with
// [ErrBroken]: whether a failed fsync left the data on disk cannot be known,
// so the only safe continuation is to reopen the file (restart the process)
// and read what is really there.
//
// # Audit
//
// Every decision is audited. Applied decisions are written in the same
// transaction as the fence. Stale, duplicate and rejected decisions cost no
// fsync of their own: they are buffered in memory and written with the next
// fence transaction, or by a background flush at most once per
// [Options.AuditFlush]. A crash can lose at most that buffer. The trail keeps
// the newest [Options.AuditLimit] entries.
//
// This package imports neither MQTT nor GPIO code.
package fencelog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Errors returned by Open.
var (
	// ErrNotExist is returned by Open when the store file is missing and
	// Options.Create is false. A silently recreated store would forget every
	// fence and let old commands win again.
	ErrNotExist = errors.New("fencelog: store does not exist")
	// ErrNotStore is returned by Open for a bbolt file that fencegate did not create.
	ErrNotStore = errors.New("fencelog: file is not a fencegate store")
	// ErrLocked is returned by Open when another process holds the store.
	ErrLocked = errors.New("fencelog: store is locked by another process")
	// ErrFormat is returned by Open for a store of a format this build
	// cannot read.
	ErrFormat = errors.New("fencelog: unsupported store format")
	// ErrEmpty is returned by Open for a file of zero bytes, with or
	// without Options.Create: a store that was truncated (or never
	// written) must not silently become a fresh store that accepts any
	// token.
	ErrEmpty = errors.New("fencelog: store file is empty")
	// ErrOtherGateway is returned by Open for a store that another gateway
	// id recorded as its own (see Options.Gateway): its fences are another
	// gateway's, and taking them over would mix two gateways' tokens.
	ErrOtherGateway = errors.New("fencelog: store belongs to another gateway")
	// ErrUnwritable is returned by a writable Open of a store on a
	// read-only filesystem or that the process may not write.
	ErrUnwritable = errors.New("fencelog: store cannot be written")
)

// Errors returned by a Store's methods.
var (
	// ErrBroken is returned by every write after a commit failed.
	ErrBroken = errors.New("fencelog: store refused after a failed write; restart to reopen it")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("fencelog: store is closed")
	// ErrReadOnly is returned by every write to a store opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("fencelog: store is open read-only")
	// ErrGone is wrapped (with ErrBroken) by the first write after the
	// store's file was deleted, or replaced by another file, while it was
	// open: what was written went to a file that nobody can open again.
	ErrGone = errors.New("fencelog: store file is gone from its path")
)

const formatVersion = "1"

var (
	bucketMeta   = []byte("meta")
	bucketScopes = []byte("scopes")
	bucketAudit  = []byte("audit")
	bucketBind   = []byte("actuators")
	bucketInputs = []byte("inputs")
	keyFormat    = []byte("format")
	keyID        = []byte("id")
	keyFloor     = []byte("floor")
	keyFloorWhy  = []byte("floor_why")
	keyCreated   = []byte("created")
	keyGateway   = []byte("gateway")
)

// Birth is the decision a store is created with: which tokens are
// already spent. A store that forgot this (a replaced SD card, a deleted
// file) would accept a paused controller's old token again, so Open never
// creates a store without one.
type Birth struct {
	// Floor: every token at or below it is stale in every scope, for good.
	Floor uint64
	// Why says, for people, how the floor was decided (gateway inspect
	// shows it): "--new: ...", "--floor 1200", "--floor-from-etcd URL:
	// revision 1234". It is required: it is the record of the decision.
	Why string
	// At is when the store was created, as Store.Birth reports it; Open
	// ignores it when creating.
	At time.Time
}

// Fresh is the birth of a store for a gateway for which no controller
// ever held a token: floor 0 (gateway init --new, run --init).
func Fresh() *Birth {
	return &Birth{Why: "--new: no controller ever held a token for this gateway"}
}

// Options configure Open. The zero value (or nil) is usable.
type Options struct {
	// Create, if set, makes Open create a missing store (and its
	// directory) with this floor decision. It never turns an existing
	// file into a store, not even an empty one, and never changes the
	// floor of an existing store.
	Create *Birth
	// ReadOnly opens the store for reading only (gateway inspect, check):
	// it takes a shared lock, which waits while a gateway holds the store,
	// and every write fails with ErrReadOnly.
	ReadOnly bool
	// Timeout bounds the wait for the store's file lock. Zero means one
	// second, so a restarted gateway fails fast on a stale lock instead of hanging.
	Timeout time.Duration
	// AuditLimit is the number of audit entries kept. Zero means 10000.
	AuditLimit int
	// AuditFlush is the interval of the background flush of buffered audit
	// entries. Zero means one second; negative disables the background
	// flush (entries are then written with the next fence and on Close).
	AuditFlush time.Duration
	// Now stamps records and audit entries for people to read. No decision
	// uses it. Nil means time.Now.
	Now func() time.Time
	// Logger receives background flush errors. Nil discards.
	Logger *slog.Logger
	// Gateway is the id of the gateway that uses the store. A new store
	// records it, and so does the first writable Open of a store that
	// has none yet (one made by an older build); Open refuses a store that
	// recorded another id, with ErrOtherGateway. Empty checks nothing.
	Gateway string
	// CommitDelay is added to every commit, after its sync, as a slower
	// disk's sync would take (a benchmark of SD-card-like storage on a fast
	// disk). Zero in normal use.
	CommitDelay time.Duration
	// OnCommit, if set, is told how long each commit took (its syncs
	// included) and how many writes it held. It runs in the committing
	// goroutine and must not block.
	OnCommit func(took time.Duration, writes int)
}

// Store is an open store. Its methods are safe for concurrent use.
type Store struct {
	db    *bolt.DB
	opts  Options
	path  string
	id    string
	birth Birth
	// gateway is the gateway id the store recorded ("" if none yet).
	gateway string
	// file is the store's file as Open found it at its path; every
	// commit checks that the path still names it.
	file os.FileInfo

	commit committer // runs the writes, many in one commit

	// cache holds the scope records as the last commit left them, decoded:
	// decisions that write nothing (stale, duplicate) read them without a
	// transaction. Only commits change it, after they committed; a scope
	// not in it (never written, or damaged) is read from the store.
	cmu   sync.RWMutex
	cache map[string]record
	// staged holds the records the write transaction in progress wrote;
	// only the committer touches it.
	staged map[string]record

	mu      sync.Mutex // guards the fields below
	pending []Entry
	dropped uint64
	broken  error
	closing bool // Close has begun: nothing more is buffered
	closed  bool

	closeOnce sync.Once
	closeErr  error

	stop       chan struct{}
	done       chan struct{}
	brokenOnce sync.Once
	brokenCh   chan struct{}
}

// Open opens the store at path. See Options for creating one.
func Open(path string, opts *Options) (*Store, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	if o.AuditLimit <= 0 {
		o.AuditLimit = 10000
	}
	if o.AuditFlush == 0 {
		o.AuditFlush = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}

	if o.ReadOnly {
		o.Create = nil
		o.AuditFlush = -1
	}

	fi, statErr := os.Stat(path)
	existed := statErr == nil
	var madeDirs []string // directories made for a new store, outermost first
	switch {
	case statErr == nil && !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNotStore, path)
	case statErr == nil && fi.Size() == 0:
		return nil, fmt.Errorf("%w: %s has 0 bytes: it was truncated or never written. A fresh store would accept tokens this gateway already refused; "+
			"if no controller can hold a token for this gateway, delete the file and create the store with gateway init", ErrEmpty, path)
	case statErr == nil:
		if err := checkFile(path, fi.Size()); err != nil {
			return nil, err
		}
	case errors.Is(statErr, fs.ErrNotExist) && o.Create != nil && strings.TrimSpace(o.Create.Why) == "":
		return nil, fmt.Errorf("fencelog: create %s: no floor decision: say which tokens are already spent (gateway init --floor N, --floor-from-etcd URL or --new)", path)
	case errors.Is(statErr, fs.ErrNotExist) && o.Create != nil:
		var err error
		if madeDirs, err = makeDirs(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("fencelog: create store directory: %w", err)
		}
	case errors.Is(statErr, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s (create it once with gateway init; never recreate the store of a gateway whose controllers still hold tokens)", ErrNotExist, path)
	default:
		return nil, fmt.Errorf("fencelog: open %s: %w", path, statErr)
	}

	db, err := openBolt(path, &bolt.Options{Timeout: o.Timeout, ReadOnly: o.ReadOnly})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s: another process (a gateway, or gateway inspect) has it open, and one gateway at a time may use a store; "+
			"waited %v for it. Stop the other process, or give this gateway a store of its own", ErrLocked, path, o.Timeout)
	}
	if err != nil && (damaged(err) || existed && strings.Contains(err.Error(), "file size too small")) {
		return nil, fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	if err != nil && (errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)) {
		return nil, fmt.Errorf("%w: %s: %v. The gateway records every fence there, fsynced, before it drives an output, so it cannot run without writing it: "+
			"remount its filesystem read-write (a filesystem that went read-only after I/O errors needs a check first) or give the gateway's user write access to it and its directory", ErrUnwritable, path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fencelog: open %s: %w", path, err)
	}
	if existed {
		if err := walk(db, path); err != nil {
			db.Close()
			return nil, err
		}
	}
	file, err := os.Stat(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("fencelog: open %s: %w", path, err)
	}
	var id, gateway string
	if o.ReadOnly {
		err = db.View(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if meta == nil {
				return ErrNotStore
			}
			if v := string(meta.Get(keyFormat)); v != formatVersion {
				return fmt.Errorf("%w: format %q, and this build reads %q (was it written by a newer fencegate?)", ErrFormat, v, formatVersion)
			}
			id, gateway = string(meta.Get(keyID)), string(meta.Get(keyGateway))
			return checkGateway(path, gateway, o.Gateway)
		})
	} else {
		err = db.Update(func(tx *bolt.Tx) error {
			var err error
			id, gateway, err = initStore(tx, o.Create, o.Gateway, o.Now())
			if err == nil {
				err = checkGateway(path, gateway, o.Gateway)
			}
			return err
		})
	}
	if err != nil {
		db.Close()
		if errors.Is(err, ErrNotStore) {
			return nil, fmt.Errorf("%w: %s", ErrNotStore, path)
		}
		if errors.Is(err, ErrOtherGateway) {
			return nil, err
		}
		return nil, fmt.Errorf("fencelog: open %s: %w", path, err)
	}
	if !existed {
		if err := syncEntries(path, madeDirs); err != nil {
			db.Close()
			return nil, fmt.Errorf("fencelog: sync store directory: %w", err)
		}
	}

	var birth Birth
	db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		birth.Floor = floor(tx)
		birth.Why = string(meta.Get(keyFloorWhy))
		birth.At, _ = time.Parse(time.RFC3339, string(meta.Get(keyCreated)))
		return nil
	})

	l := &Store{db: db, opts: o, path: path, id: id, gateway: gateway, file: file, birth: birth, stop: make(chan struct{}), done: make(chan struct{}), brokenCh: make(chan struct{}),
		cache: loadScopes(db), commit: committer{grew: make(chan struct{}, 1)}}
	if o.AuditFlush > 0 {
		go l.flusher()
	} else {
		close(l.done)
	}
	return l, nil
}

// openBolt is bolt.Open, with a panic (bbolt's answer to some damaged
// pages that checkFile cannot see) returned as ErrDamaged. bbolt then keeps
// the file open, and its lock held, until the process exits; a gateway
// exits on ErrDamaged.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: %s: %v", ErrDamaged, path, r)
		}
	}()
	return bolt.Open(path, 0o600, opts)
}

// initStore checks (or, with create, makes) the store's buckets and
// returns its id and the gateway id it recorded, giving a store of an
// older build an id and, if gateway is set and it has none, that gateway.
func initStore(tx *bolt.Tx, create *Birth, gateway string, now time.Time) (id, owner string, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if create == nil || !isEmpty(tx) {
			return "", "", ErrNotStore
		}
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return "", "", err
		}
		for k, v := range map[string][]byte{
			string(keyFormat):   []byte(formatVersion),
			string(keyFloor):    u64(create.Floor),
			string(keyFloorWhy): []byte(create.Why),
			string(keyCreated):  []byte(now.UTC().Format(time.RFC3339)),
		} {
			if err := meta.Put([]byte(k), v); err != nil {
				return "", "", err
			}
		}
	}
	if v := string(meta.Get(keyFormat)); v != formatVersion {
		return "", "", fmt.Errorf("%w: format %q, and this build reads %q (was it written by a newer fencegate?)", ErrFormat, v, formatVersion)
	}
	for _, name := range [][]byte{bucketScopes, bucketAudit, bucketBind} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return "", "", err
		}
	}
	rid := meta.Get(keyID)
	if rid == nil {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", "", err
		}
		rid = []byte(hex.EncodeToString(b[:]))
		if err := meta.Put(keyID, rid); err != nil {
			return "", "", err
		}
	}
	owner = string(meta.Get(keyGateway))
	if owner == "" && gateway != "" {
		if err := meta.Put(keyGateway, []byte(gateway)); err != nil {
			return "", "", err
		}
		owner = gateway
	}
	return string(rid), owner, nil
}

// checkGateway refuses a store that recorded gateway id owner when the
// configuration says want.
func checkGateway(path, owner, want string) error {
	if owner == "" || want == "" || owner == want {
		return nil
	}
	return fmt.Errorf("%w: %s is the store of gateway %q, and this configuration's id is %q. "+
		"A store holds its own gateway's fences; give this gateway its own store (gateway init), or set id: %q if this is that gateway",
		ErrOtherGateway, path, owner, want, owner)
}

func isEmpty(tx *bolt.Tx) bool {
	empty := true
	_ = tx.ForEach(func([]byte, *bolt.Bucket) error {
		empty = false
		return nil
	})
	return empty
}

// makeDirs makes dir and any missing parent, and returns the directories
// it made, outermost first.
func makeDirs(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append([]string{d}, missing...)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	return missing, nil
}

// syncEntries makes the directory entries of a new store durable: the
// store's in its directory, and each made directory's in its parent. A
// crash after an unsynced creation could leave a store that was written
// and fsynced, but that has no name.
func syncEntries(path string, madeDirs []string) error {
	for _, d := range madeDirs {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Path returns the store's file name.
func (l *Store) Path() string { return l.path }

// Gateway returns the gateway id the store recorded ("" for a store opened
// read-only that has none yet).
func (l *Store) Gateway() string { return l.gateway }

// ID returns the store's identity: random, made once when the store was
// created (or first opened by a build that keeps one), and never changed.
// Two gateways that answer for one gateway id with different stores are
// told apart by it. Empty for a store opened read-only that has none yet.
func (l *Store) ID() string { return l.id }

// Birth returns the floor decision the store was created with. A store
// created before floors existed has floor 0 and no Why.
func (l *Store) Birth() Birth { return l.birth }

// Broken returns a channel that is closed when a write fails and the Store
// starts refusing writes. A gateway should then exit and be restarted.
func (l *Store) Broken() <-chan struct{} { return l.brokenCh }

// Err returns ErrBroken (wrapping the original failure) once a write has
// failed, ErrClosed after Close, and nil otherwise.
func (l *Store) Err() error { return l.usable() }

// Close flushes buffered audit entries and closes the store. It may be
// called more than once, also concurrently; every call returns the first
// call's result once the store is closed.
func (l *Store) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closing = true // Record refuses from now on
		l.mu.Unlock()
		close(l.stop)
		<-l.done
		var flushErr error
		if l.usable() == nil && !l.opts.ReadOnly {
			flushErr = l.flush()
		}
		if errors.Is(flushErr, ErrBroken) {
			flushErr = nil // already reported by the write that broke the store
		}
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		if err := l.db.Close(); err != nil {
			l.closeErr = fmt.Errorf("fencelog: close: %w", err)
			return
		}
		l.closeErr = flushErr
	})
	return l.closeErr
}

// sameFile reports, with ErrGone, a store whose path no longer names the
// file Open opened. It costs one stat.
func (l *Store) sameFile() error {
	fi, err := os.Stat(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s was deleted while the gateway had it open: what it records now goes to a file nobody can open again. "+
			"Restore the store, or create it again with gateway init --floor-from-etcd (see docs/design.md)", ErrGone, l.path)
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrGone, l.path, err)
	case !os.SameFile(fi, l.file):
		return fmt.Errorf("%w: %s was replaced by another file while the gateway had it open: what it records now goes to the old file, which nobody can open again. "+
			"Restarting opens the file that is there now: make sure it is this gateway's newest store (see docs/design.md)", ErrGone, l.path)
	}
	return nil
}

func (l *Store) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.broken
}

func (l *Store) writable() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	return nil
}

func (l *Store) fail(op string, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("fencelog: %s: %w", op, ErrClosed)
	}
	if l.broken == nil {
		l.broken = fmt.Errorf("%w (first failure: %s: %v)", ErrBroken, op, err)
		l.brokenOnce.Do(func() { close(l.brokenCh) })
	}
	return fmt.Errorf("fencelog: %s: %w", op, errors.Join(ErrBroken, err))
}
