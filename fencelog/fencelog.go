// Package fencelog is fencegate's durable fence record: per fence scope, the
// highest (token, seq) admitted, the window of recently applied commands, the
// intended state of each actuator, and a bounded audit trail, kept in a bbolt
// file.
//
// # Safety
//
// [Log.Admit] compares a command with the scope's fence and, if it passes,
// records the new fence and the intended state in one bbolt read-write
// transaction whose commit is fsynced before Admit returns. A caller that
// drives an output only after Admit returned Applied therefore never drives
// an output whose fence is not on disk. The comparison inside that
// transaction is authoritative: the read-only fast path that answers stale
// and duplicate commands without writing can never admit anything.
//
// After a failed commit the Log refuses every further write with
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
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
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

// Errors returned by a Log's methods.
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

// OutcomeBoot marks an audit entry for a state set at start by an
// actuator's boot policy (boot: on or boot: off); the fence is not touched.
const OutcomeBoot fence.Outcome = "boot"

// OutcomeMoved marks an audit entry for an actuator that the configuration
// moved to another scope; see Log.Bind.
const OutcomeMoved fence.Outcome = "moved"

// OutcomeInterlock marks an audit entry for an actuator that an interlock
// switched off so that another member of it could come on
// (break-before-make); it is written with the command's applied entry.
const OutcomeInterlock fence.Outcome = "interlock"

// OutcomePulse marks an audit entry for the end of a pulse: done, or
// interrupted (see Log.EndPulse).
const OutcomePulse fence.Outcome = "pulse"

// OutcomeSafe marks an audit entry for an output a scope's dead-man set
// to its safe state: no command reached the scope in time, or the broker
// connection was lost. The fence is not touched.
const OutcomeSafe fence.Outcome = "safe"

// OutcomeTrip marks an audit entry for an output a scope's trip input
// sent to its safe state. The fence is not touched.
const OutcomeTrip fence.Outcome = "trip"

// OutcomeMaxOn marks an audit entry for an output switched off because it
// had been on for its max_on. The fence is not touched.
const OutcomeMaxOn fence.Outcome = "max-on"

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
	// At is when the store was created, as Log.Birth reports it; Open
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

// Entry is one audit record.
type Entry struct {
	// Seq numbers entries in the order they were written, which is the
	// order of decisions except that a buffered entry (a stale, duplicate
	// or rejected decision, or a failed drive's) may land after entries
	// decided later: after an applied entry of another scope, or of the
	// commands committed with its own in one batch.
	// Set when read back.
	Seq      uint64        `json:"seq,omitempty"`
	At       time.Time     `json:"at"`
	Scope    string        `json:"scope,omitempty"`
	Actuator string        `json:"actuator"`
	ID       string        `json:"id,omitempty"`
	Holder   string        `json:"holder,omitempty"`
	Command  fence.Fence   `json:"command"`
	State    fence.State   `json:"state,omitempty"`
	Outcome  fence.Outcome `json:"outcome"`
	// Reason is why a command was rejected (a fence.Reason* code).
	Reason string `json:"reason,omitempty"`
	// Fence is the scope's fence after the decision.
	Fence fence.Fence `json:"fence"`
	Error string      `json:"error,omitempty"`

	// Signer is the controller that signed the command, if it was signed
	// (for a rejected command: the one it claimed).
	Signer string `json:"signer,omitempty"`
}

// Admission is what Admit decided and the scope's record afterwards.
type Admission struct {
	fence.Decision
	// Effect is, for an applied command, what it changed: the states
	// recorded (in the order to drive them), or the refusal that changed
	// nothing but the fence.
	Effect fence.Effect
	// Output is the commanded actuator's recorded state after the
	// decision; its Fence is the scope's fence.
	Output fence.Output
	// Scope is the scope's record after the decision.
	Scope Scope
}

// Scope is a scope's record as one transaction read it.
type Scope struct {
	Name  string
	Fence fence.Fence
	rec   scopeRecord
}

// Output returns actuator's recorded state in the scope (State is
// fence.StateNone if it was never recorded).
func (s Scope) Output(actuator string) fence.Output { return s.rec.output(s.Name, actuator) }

// States returns the recorded state of every actuator with a record.
func (s Scope) States() map[string]fence.State {
	m := make(map[string]fence.State, len(s.rec.Outputs))
	for a, o := range s.rec.Outputs {
		m[a] = o.State
	}
	return m
}

// Planner decides the effect of an admitted command from its scope's
// record. Admit calls it inside the transaction that records the effect,
// so the record it sees is the one the effect is recorded over. It must
// be a pure function of its argument and what it captured.
type Planner func(rec Scope) fence.Effect

// Trip returns why the scope is held at its safe state by a trip; "" if
// it is not.
func (s Scope) Trip() string { return s.rec.Trip }

// StateChange is one state that SetStates records.
type StateChange struct {
	Scope, Actuator string
	State           fence.State
	// Holder is recorded as the state's holder ("boot" for a boot policy).
	Holder string
	// Why goes into the audit entry's error field, and into the output's
	// record (fence.Output.Why), for people.
	Why string
	// Outcome is the audit entry's outcome: OutcomeBoot if empty.
	Outcome fence.Outcome
}

// Log is an open store. Its methods are safe for concurrent use.
type Log struct {
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
	cache map[string]scopeRecord
	// staged holds the records the write transaction in progress wrote;
	// only the committer touches it.
	staged map[string]scopeRecord

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

type scopeRecord struct {
	Fence   fence.Fence             `json:"fence"`
	Recent  []fence.AppliedCommand  `json:"recent,omitempty"`
	Outputs map[string]outputRecord `json:"outputs,omitempty"`
	// Trip, if set, says why the scope is held at its safe state by an
	// input's trip, until a reset command releases it.
	Trip string `json:"trip,omitempty"`
}

type outputRecord struct {
	State     fence.State  `json:"state"`
	Holder    string       `json:"holder,omitempty"`
	ChangedAt time.Time    `json:"changed_at"`
	Pulse     *fence.Pulse `json:"pulse,omitempty"`
	// Why is set when the gateway set State itself, not a command: the
	// boot rule, a dead-man, max_on.
	Why string `json:"why,omitempty"`
}

// Open opens the store at path. See Options for creating one.
func Open(path string, opts *Options) (*Log, error) {
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
	if errors.Is(err, bolt.ErrTimeout) && o.ReadOnly {
		// Only a writer keeps a reader out: a gateway that runs on it.
		return nil, fmt.Errorf("%w: %s: a running gateway has it open, and a gateway locks its store while it runs; waited %v for it. "+
			"Read a running gateway through its HTTP API instead (--api URL), or stop it first", ErrLocked, path, o.Timeout)
	}
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

	l := &Log{db: db, opts: o, path: path, id: id, gateway: gateway, file: file, birth: birth, stop: make(chan struct{}), done: make(chan struct{}), brokenCh: make(chan struct{}),
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
func (l *Log) Path() string { return l.path }

// Gateway returns the gateway id the store recorded ("" for a store opened
// read-only that has none yet).
func (l *Log) Gateway() string { return l.gateway }

// ID returns the store's identity: random, made once when the store was
// created (or first opened by a build that keeps one), and never changed.
// Two gateways that answer for one gateway id with different stores are
// told apart by it. Empty for a store opened read-only that has none yet.
func (l *Log) ID() string { return l.id }

// Birth returns the floor decision the store was created with. A store
// created before floors existed has floor 0 and no Why.
func (l *Log) Birth() Birth { return l.birth }

// rules returns r with its floor raised to the store's.
func (l *Log) rules(r fence.Rules) fence.Rules {
	r.Floor = max(r.Floor, l.birth.Floor)
	return r
}

// testHookAdmitBetween, if set (by tests), runs in Admit between the
// read-only decision and the write transaction, where another command may
// change the fence.
var testHookAdmitBetween func()

// Admit decides command c for scope under rules (whose floor is raised to
// the store's) and, if its pair passes the fence, records the new fence, the effect plan decides (nil means fence.Plain:
// c sets its own actuator) and the audit entry in one fsynced transaction
// before returning. A refused effect records only the fence and the
// refusal, so that a redelivery is answered the same.
//
// A non-nil error means nothing was recorded and nothing may be driven; the
// caller answers failed. Stale and duplicate decisions write nothing
// synchronously.
func (l *Log) Admit(scope string, c fence.Command, rules fence.Rules, plan Planner) (Admission, error) {
	adms, err := l.AdmitBatch(scope, rules, []Request{{c, plan}})
	if err != nil {
		return Admission{}, err
	}
	return adms[0], nil
}

// Request is one command for AdmitBatch, with its effect rule (nil:
// fence.Plain, the command sets its own actuator).
type Request struct {
	Command fence.Command
	Plan    Planner
}

// AdmitBatch decides the commands of reqs for scope in their order, each
// as Admit would after the ones before it, and returns an admission for
// each: a command is decided against the record the commands before it
// left, so a redelivery in the same batch is a duplicate and a command
// behind a higher one is stale. Those that pass are all recorded, with
// every command's audit entry, in one fsynced transaction before it
// returns; a batch in which none passes writes nothing synchronously. A
// non-nil error means nothing of the batch was recorded and nothing may be
// driven.
func (l *Log) AdmitBatch(scope string, rules fence.Rules, reqs []Request) ([]Admission, error) {
	if err := l.writable(); err != nil {
		return nil, err
	}
	rules = l.rules(rules)
	// Fast path: read-only decisions answer stale and duplicate commands
	// without a write. They can never admit: only the transaction below
	// can. Until one passes, the record does not change, so each of these
	// is the decision in sequence too.
	rec, err := l.committed(scope)
	if err != nil {
		return nil, err
	}
	first := make([]fence.Decision, len(reqs))
	passes := false
	for i, r := range reqs {
		first[i] = fence.Decide(rec.Fence, rec.Recent, r.Command, rules)
		passes = passes || first[i].Outcome == fence.Applied
	}
	if !passes {
		adms := make([]Admission, len(reqs))
		for i, r := range reqs {
			adms[i] = Admission{Decision: first[i], Output: rec.output(scope, r.Command.Actuator), Scope: Scope{scope, rec.Fence, rec}}
			l.Record(l.entry(scope, r.Command, adms[i]))
		}
		return adms, nil
	}

	if testHookAdmitBetween != nil {
		testHookAdmitBetween()
	}
	pending := l.takePending()
	var adms []Admission
	err = l.update(func(tx *bolt.Tx) error {
		adms = make([]Admission, 0, len(reqs)) // fn may run twice: set, never accumulate
		rec, err := l.txScope(tx, scope)
		if err != nil {
			return err
		}
		entries := slices.Clone(pending)
		wrote := false
		// window is the scope's window and then every command this run
		// remembers, in one array (see fence.Newest): each admission's
		// view of it keeps what it saw, and remembering a command does not
		// copy the whole window again.
		var window []fence.AppliedCommand
		for i := range reqs {
			c := reqs[i].Command
			// Decide again inside the transaction: this is the decision that counts.
			d := fence.Decide(rec.Fence, rec.Recent, c, rules)
			var eff fence.Effect
			if d.Outcome == fence.Applied {
				plan := reqs[i].Plan
				if plan == nil {
					plan = func(Scope) fence.Effect { return fence.Plain(c) }
				}
				eff = plan(Scope{scope, rec.Fence, rec})
				if i > 0 {
					// The admissions before this one keep the outputs they saw.
					rec.Outputs = maps.Clone(rec.Outputs)
				}
				rec.Fence = c.Fence
				if window == nil {
					window = append(make([]fence.AppliedCommand, 0, len(rec.Recent)+len(reqs)-i), rec.Recent...)
				}
				window = append(window, fence.Remembered(c, eff.Refusal))
				rec.Recent = fence.Newest(window)
				if eff.Reset {
					rec.Trip = ""
				}
				if eff.Refusal == nil {
					now := l.opts.Now().UTC()
					for _, set := range eff.Sets {
						if rec.Outputs == nil {
							rec.Outputs = make(map[string]outputRecord)
						}
						o := outputRecord{State: set.State, Holder: c.Holder, ChangedAt: now}
						if eff.Pulse > 0 {
							// The pulse's intent, recorded before the output moves.
							o.Pulse = &fence.Pulse{ID: c.ID, Fence: c.Fence, Width: eff.Pulse, Status: fence.PulseRunning}
						}
						rec.Outputs[set.Actuator] = o
					}
				}
				wrote = true
			}
			adm := Admission{Decision: d, Effect: eff, Output: rec.output(scope, c.Actuator), Scope: Scope{scope, rec.Fence, rec}}
			adms = append(adms, adm)
			entries = append(entries, l.entry(scope, c, adm))
			for _, set := range eff.Sets {
				if set.Actuator != c.Actuator {
					entries = append(entries, Entry{At: l.opts.Now().UTC(), Scope: scope, Actuator: set.Actuator, ID: c.ID, Holder: c.Holder, Signer: c.Signer,
						Command: c.Fence, State: set.State, Outcome: OutcomeInterlock, Fence: rec.Fence,
						Error: fmt.Sprintf("switched %s by %s's command (break-before-make)", set.State, c.Actuator)})
				}
			}
		}
		if wrote {
			if err := l.writeScope(tx, scope, rec); err != nil {
				return err
			}
		}
		return l.appendAudit(tx, entries)
	})
	if err != nil {
		return nil, l.fail("admit", err)
	}
	return adms, nil
}

// SetStates records states without touching any fence, in one fsynced
// transaction; it is how the boot rule records what it decided.
func (l *Log) SetStates(changes []StateChange) error { return l.setStates(changes, "", "") }

// SetTrip records that scope is held at its safe state by a trip, why,
// together with the states the trip sets, in one fsynced transaction; the
// fence is not touched. A command with fence.Effect.Reset releases it.
func (l *Log) SetTrip(scope, why string, changes []StateChange) error {
	return l.setStates(changes, scope, why)
}

func (l *Log) setStates(changes []StateChange, tripScope, trip string) error {
	if err := l.writable(); err != nil {
		return err
	}
	if len(changes) == 0 && trip == "" {
		return nil
	}
	pending := l.takePending()
	err := l.update(func(tx *bolt.Tx) error {
		now := l.opts.Now().UTC()
		recs := map[string]scopeRecord{}
		var audit []Entry
		if trip != "" {
			rec, err := l.txScope(tx, tripScope)
			if err != nil {
				return err
			}
			rec.Trip = trip
			recs[tripScope] = rec
		}
		for _, ch := range changes {
			rec, ok := recs[ch.Scope]
			if !ok {
				var err error
				if rec, err = l.txScope(tx, ch.Scope); err != nil {
					return err
				}
			}
			if rec.Outputs == nil {
				rec.Outputs = make(map[string]outputRecord)
			}
			rec.Outputs[ch.Actuator] = outputRecord{State: ch.State, Holder: ch.Holder, ChangedAt: now, Why: ch.Why, Pulse: rec.Outputs[ch.Actuator].Pulse}
			recs[ch.Scope] = rec
			outcome := ch.Outcome
			if outcome == "" {
				outcome = OutcomeBoot
			}
			audit = append(audit, Entry{At: now, Scope: ch.Scope, Actuator: ch.Actuator, Holder: ch.Holder,
				State: ch.State, Outcome: outcome, Fence: rec.Fence, Error: ch.Why})
		}
		for scope, rec := range recs {
			if err := l.writeScope(tx, scope, rec); err != nil {
				return err
			}
		}
		return l.appendAudit(tx, append(pending, audit...))
	})
	if err != nil {
		return l.fail("set states", err)
	}
	return nil
}

// EndPulse records, in one fsynced transaction, that the pulse p of
// actuator in scope ended, status saying how (fence.PulseDone, or
// fence.PulseInterrupted): the output at rest (off), the pulse's status
// in the output's record and in the scope's window of recent commands (a
// redelivery is answered with it), and an audit entry with why. The fence
// is not touched. If the output's record is not p running (it ended
// already), nothing is written and ok is false.
func (l *Log) EndPulse(scope, actuator string, p fence.Pulse, status, why string) (_ Scope, ok bool, _ error) {
	if err := l.writable(); err != nil {
		return Scope{}, false, err
	}
	var out Scope
	pending := l.takePending()
	err := l.update(func(tx *bolt.Tx) error {
		ok = false
		rec, err := l.txScope(tx, scope)
		if err != nil {
			return err
		}
		o, has := rec.Outputs[actuator]
		if !has || o.Pulse == nil || o.Pulse.Status != fence.PulseRunning || o.Pulse.Fence != p.Fence || o.Pulse.ID != p.ID {
			out = Scope{scope, rec.Fence, rec}
			return l.appendAudit(tx, pending)
		}
		now := l.opts.Now().UTC()
		rec.Outputs = maps.Clone(rec.Outputs)
		ended := *o.Pulse
		ended.Status = status
		rec.Outputs[actuator] = outputRecord{State: fence.StateOff, Holder: o.Holder, ChangedAt: now, Pulse: &ended}
		rec.Recent = slices.Clone(rec.Recent)
		for i, a := range rec.Recent {
			if a.Actuator == actuator && a.Fence == p.Fence && a.ID == p.ID && a.Pulse > 0 {
				rec.Recent[i].PulseStatus = status
			}
		}
		if err := l.writeScope(tx, scope, rec); err != nil {
			return err
		}
		ok = true
		out = Scope{scope, rec.Fence, rec}
		return l.appendAudit(tx, append(pending, Entry{At: now, Scope: scope, Actuator: actuator, ID: p.ID, Holder: o.Holder,
			Command: p.Fence, State: fence.StateOff, Outcome: OutcomePulse, Fence: rec.Fence, Error: why}))
	})
	if err != nil {
		return Scope{}, false, l.fail("end pulse", err)
	}
	return out, ok, nil
}

// InputRecord is a digital input's last recorded level and how many
// times it changed.
type InputRecord struct {
	High      bool      `json:"high"`
	Seq       uint64    `json:"seq"`
	ChangedAt time.Time `json:"changed_at"`
}

// RecordInput records that input name is at level high: if that is not
// its recorded level (or it has none), with its change count one higher,
// in one fsynced write; else it changes nothing. It returns the record.
func (l *Log) RecordInput(name string, high bool) (InputRecord, error) {
	if err := l.writable(); err != nil {
		return InputRecord{}, err
	}
	var cur InputRecord
	found := false
	if err := l.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketInputs); b != nil {
			if v := b.Get([]byte(name)); v != nil {
				found = true
				return json.Unmarshal(v, &cur)
			}
		}
		return nil
	}); err != nil {
		return InputRecord{}, fmt.Errorf("fencelog: read input %s: %w", name, err)
	}
	if found && cur.High == high {
		return cur, nil
	}
	next := InputRecord{High: high, Seq: cur.Seq + 1, ChangedAt: l.opts.Now().UTC()}
	v, err := json.Marshal(next)
	if err != nil {
		return InputRecord{}, err
	}
	pending := l.takePending()
	err = l.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketInputs)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(name), v); err != nil {
			return err
		}
		return l.appendAudit(tx, pending)
	})
	if err != nil {
		return InputRecord{}, l.fail("record input", err)
	}
	return next, nil
}

// Scope reads a scope's record.
func (l *Log) Scope(name string) (Scope, error) {
	rec, err := l.committed(name)
	if err != nil {
		return Scope{}, err
	}
	return Scope{name, rec.Fence, rec}, nil
}

// committed returns scope's record as the last commit left it. The record
// shares its slices and maps with the cache: read it, never change it.
func (l *Log) committed(scope string) (scopeRecord, error) {
	l.cmu.RLock()
	rec, ok := l.cache[scope]
	l.cmu.RUnlock()
	if ok {
		return rec, nil
	}
	if err := l.db.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = readScope(tx, scope)
		return err
	}); err != nil {
		return scopeRecord{}, fmt.Errorf("fencelog: read scope %q: %w", scope, err)
	}
	return rec, nil
}

// loadScopes reads every scope record that decodes, for the cache.
func loadScopes(db *bolt.DB) map[string]scopeRecord {
	m := make(map[string]scopeRecord)
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketScopes).ForEach(func(k, _ []byte) error {
			if rec, err := readScope(tx, string(k)); err == nil {
				m[string(k)] = rec
			}
			return nil
		})
	})
	return m
}

// Bind records the scope of each actuator (actuator name → scope). An
// actuator whose recorded scope differs, because the configuration moved it,
// brings its old scope's fence and its recorded state along: the new scope's
// fence is raised to at least the old one, so that regrouping actuators can
// never let a token pass that the old fence had already refused. Bind
// returns the actuators that moved, and writes (with fsync) only if
// something changed.
func (l *Log) Bind(scopes map[string]string) ([]string, error) {
	if err := l.writable(); err != nil {
		return nil, err
	}
	changed := false
	if err := l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBind)
		for act, scope := range scopes {
			if string(b.Get([]byte(act))) != scope {
				changed = true
			}
		}
		return nil
	}); err != nil || !changed {
		return nil, err
	}
	var moved []string
	pending := l.takePending()
	err := l.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBind)
		var audit []Entry
		for act, scope := range scopes {
			prev := string(b.Get([]byte(act)))
			if prev != "" && prev != scope {
				from, err := l.txScope(tx, prev)
				if err != nil {
					return err
				}
				to, err := l.txScope(tx, scope)
				if err != nil {
					return err
				}
				if to.Fence.Less(from.Fence) {
					to.Fence = from.Fence
				}
				if o, ok := from.Outputs[act]; ok {
					if to.Outputs == nil {
						to.Outputs = make(map[string]outputRecord)
					}
					to.Outputs[act] = o
					delete(from.Outputs, act)
				}
				if err := l.writeScope(tx, prev, from); err != nil {
					return err
				}
				if err := l.writeScope(tx, scope, to); err != nil {
					return err
				}
				moved = append(moved, act)
				audit = append(audit, Entry{At: l.opts.Now().UTC(), Scope: scope, Actuator: act, Outcome: OutcomeMoved,
					Fence: to.Fence, Error: fmt.Sprintf("moved from scope %q (fence %s)", prev, from.Fence)})
			}
			if err := b.Put([]byte(act), []byte(scope)); err != nil {
				return err
			}
		}
		return l.appendAudit(tx, append(pending, audit...))
	})
	if err != nil {
		return nil, l.fail("bind", err)
	}
	sort.Strings(moved)
	return moved, nil
}

// Output returns the recorded state of actuator in scope. An actuator never
// set has State fence.StateNone.
func (l *Log) Output(scope, actuator string) (fence.Output, error) {
	rec, err := l.committed(scope)
	if err != nil {
		return fence.Output{}, err
	}
	return rec.output(scope, actuator), nil
}

// Fences returns every scope's fence.
func (l *Log) Fences() (map[string]fence.Fence, error) {
	m := make(map[string]fence.Fence)
	err := l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketScopes).ForEach(func(k, v []byte) error {
			var rec scopeRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("scope %q: %w", k, err)
			}
			m[string(k)] = atLeastFloor(tx, rec.Fence)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("fencelog: read fences: %w", err)
	}
	return m, nil
}

// Record adds e to the audit trail without a write of its own: it is
// buffered and written with the next fence transaction or background flush.
// Entry.At is set if zero. After Close it records nothing and returns
// ErrClosed; on a read-only store, ErrReadOnly.
func (l *Log) Record(e Entry) error {
	if e.At.IsZero() {
		e.At = l.opts.Now().UTC()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closing:
		return ErrClosed
	case l.opts.ReadOnly:
		return ErrReadOnly
	}
	if len(l.pending) >= l.opts.AuditLimit {
		// Drop the oldest by slicing, not copying: a stale flood beyond
		// the limit would otherwise move the whole buffer for each entry.
		// Appending reallocates once the array's end is reached, which
		// lets the dropped entries go.
		n := len(l.pending) - l.opts.AuditLimit + 1
		clear(l.pending[:n])
		l.pending = l.pending[n:]
		l.dropped += uint64(n)
	}
	l.pending = append(l.pending, e)
	return nil
}

// Audit returns up to n of the newest audit entries, oldest first,
// including buffered ones not yet written.
func (l *Log) Audit(n int) ([]Entry, error) { return l.FindAudit(AuditQuery{Limit: n}) }

// AuditOutcomes are the outcomes an audit entry may have: the answers'
// and the gateway's own actions (boot, moved, interlock).
var AuditOutcomes = []fence.Outcome{fence.Applied, fence.Duplicate, fence.Stale, fence.Rejected, fence.Failed,
	OutcomeBoot, OutcomeMoved, OutcomeInterlock, OutcomePulse, OutcomeSafe, OutcomeMaxOn, OutcomeTrip}

// AuditQuery selects audit entries. Empty fields select everything.
type AuditQuery struct {
	// Actuator, Outcome (one of AuditOutcomes) and Holder must equal the
	// entry's.
	Actuator string
	Outcome  fence.Outcome
	Holder   string
	// Since and Until bound the entry's time: Since <= At < Until.
	Since, Until time.Time
	// Limit is the most entries returned, the newest that match.
	Limit int
}

// Match reports whether q selects e (Limit aside).
func (q AuditQuery) Match(e Entry) bool {
	return (q.Actuator == "" || e.Actuator == q.Actuator) && (q.Outcome == "" || e.Outcome == q.Outcome) &&
		(q.Holder == "" || e.Holder == q.Holder) && (q.Since.IsZero() || !e.At.Before(q.Since)) &&
		(q.Until.IsZero() || e.At.Before(q.Until))
}

// FindAudit returns up to q.Limit of the newest audit entries that q
// selects, oldest first (in the order they were written), including
// buffered ones not yet written. It reads the trail from its newest entry
// back, all of it if need be: times are the wall clock's, which a clock
// step can make go backwards, so an entry older than Since does not end
// the search.
func (l *Log) FindAudit(q AuditQuery) ([]Entry, error) {
	l.mu.Lock()
	var out []Entry
	for i := len(l.pending) - 1; i >= 0 && len(out) < q.Limit; i-- {
		if q.Match(l.pending[i]) {
			out = append(out, l.pending[i])
		}
	}
	l.mu.Unlock()
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.Last(); k != nil && len(out) < q.Limit; k, v = c.Prev() {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			e.Seq = binary.BigEndian.Uint64(k)
			if q.Match(e) {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fencelog: read audit: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// Flush writes buffered audit entries now.
func (l *Log) Flush() error {
	if err := l.writable(); err != nil {
		return err
	}
	return l.flush()
}

func (l *Log) flush() error {
	pending := l.takePending()
	if len(pending) == 0 {
		return nil
	}
	if err := l.update(func(tx *bolt.Tx) error { return l.appendAudit(tx, pending) }); err != nil {
		return l.fail("flush audit", err)
	}
	return nil
}

// Broken returns a channel that is closed when a write fails and the Log
// starts refusing writes. A gateway should then exit and be restarted.
func (l *Log) Broken() <-chan struct{} { return l.brokenCh }

// Err returns ErrBroken (wrapping the original failure) once a write has
// failed, ErrClosed after Close, and nil otherwise.
func (l *Log) Err() error { return l.usable() }

// Close flushes buffered audit entries and closes the store. It may be
// called more than once, also concurrently; every call returns the first
// call's result once the store is closed.
func (l *Log) Close() error {
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
func (l *Log) sameFile() error {
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

func (l *Log) flusher() {
	defer close(l.done)
	t := time.NewTicker(l.opts.AuditFlush)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if err := l.Flush(); err != nil && !errors.Is(err, ErrBroken) && !errors.Is(err, ErrClosed) {
				l.opts.Logger.Error("audit flush failed", "err", err)
			}
			// Between commits too: a store deleted while the gateway is
			// idle stops it within a tick, not at the next command.
			if err := l.sameFile(); err != nil && l.usable() == nil {
				l.fail("watch store", err)
			}
		}
	}
}

func (l *Log) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.broken
}

func (l *Log) writable() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	return nil
}

func (l *Log) fail(op string, err error) error {
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

func (l *Log) takePending() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending
	l.pending = nil
	return p
}

func (l *Log) entry(scope string, c fence.Command, adm Admission) Entry {
	e := Entry{At: l.opts.Now().UTC(), Scope: scope, Actuator: c.Actuator, ID: c.ID, Holder: c.Holder, Signer: c.Signer,
		Command: c.Fence, State: c.State, Outcome: adm.Outcome, Reason: adm.Reason, Fence: adm.Output.Fence, Error: adm.Error}
	r := adm.Effect.Refusal
	if adm.Outcome == fence.Duplicate && adm.Original != nil {
		r = adm.Original.Refused
	}
	if r != nil {
		// Refused: its pair raised the fence (or, for a redelivery, had),
		// but it changed no output; the answer is rejected.
		e.Outcome, e.Reason, e.Error = fence.Rejected, r.Reason, r.Error
	}
	return e
}

// appendAudit writes entries and trims the trail to AuditLimit.
func (l *Log) appendAudit(tx *bolt.Tx, entries []Entry) error {
	b := tx.Bucket(bucketAudit)
	var last uint64
	for _, e := range entries {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		e.Seq = 0
		v, err := encodeEntry(e)
		if err != nil {
			return err
		}
		if err := b.Put(u64(seq), v); err != nil {
			return err
		}
		last = seq
	}
	if last <= uint64(l.opts.AuditLimit) {
		return nil
	}
	cutoff := last - uint64(l.opts.AuditLimit)
	var old [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= cutoff; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// readScope reads a scope's record. A fence below the store's floor (a
// scope never commanded since the store was created) reads as the floor.
func readScope(tx *bolt.Tx, scope string) (scopeRecord, error) {
	var rec scopeRecord
	if v := tx.Bucket(bucketScopes).Get([]byte(scope)); v != nil {
		if err := json.Unmarshal(v, &rec); err != nil {
			return rec, fmt.Errorf("corrupt record for scope %q: %w", scope, err)
		}
	}
	rec.Fence = atLeastFloor(tx, rec.Fence)
	return rec, nil
}

// floor returns the store's floor (0 for a store from before floors).
func floor(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(keyFloor); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func atLeastFloor(tx *bolt.Tx, f fence.Fence) fence.Fence {
	if fl := floor(tx); f.Token < fl {
		return fence.Fence{Token: fl}
	}
	return f
}

// txScope returns scope's record in the write transaction tx, for a
// change: as this transaction wrote it, else as the last commit left it
// (the cache: only commits change it, one at a time, so it is what tx
// started from), else from the store. Its Outputs are a copy, to change.
func (l *Log) txScope(tx *bolt.Tx, scope string) (scopeRecord, error) {
	rec, ok := l.staged[scope]
	if !ok {
		l.cmu.RLock()
		rec, ok = l.cache[scope]
		l.cmu.RUnlock()
	}
	if !ok {
		return readScope(tx, scope)
	}
	rec.Outputs = maps.Clone(rec.Outputs)
	return rec, nil
}

// writeScope writes scope's record in tx, and stages it for the cache,
// which takes it once tx committed.
func (l *Log) writeScope(tx *bolt.Tx, scope string, rec scopeRecord) error {
	v, err := encodeScope(rec)
	if err != nil {
		return err
	}
	if l.staged != nil {
		l.staged[scope] = rec
	}
	return tx.Bucket(bucketScopes).Put([]byte(scope), v)
}

func (rec scopeRecord) output(scope, actuator string) fence.Output {
	o := rec.Outputs[actuator]
	return fence.Output{Actuator: actuator, Scope: scope, State: o.State, Fence: rec.Fence, Holder: o.Holder, ChangedAt: o.ChangedAt, Pulse: o.Pulse, Why: o.Why}
}
