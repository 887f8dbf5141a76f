package fencelog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// openLog creates a store in a temporary directory. At cleanup it closes
// the log, reopens the file and checks that every record decodes and that
// no remembered command lies above its scope's fence.
func openLog(t *testing.T, opts *Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fence.db")
	o := Options{Create: Fresh(), AuditFlush: -1}
	if opts != nil {
		o = *opts
		o.Create = Fresh()
	}
	l, err := Open(path, &o)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() {
		l.Close()
		checkStore(t, path)
	})
	return l, path
}

func checkStore(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Errorf("reopen %s: %v", path, err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return tx.Bucket(bucketScopes).ForEach(func(k, v []byte) error {
			rec, err := readScope(tx, string(k))
			if err != nil {
				return err
			}
			for _, a := range rec.Recent {
				if rec.Fence.Less(a.Fence) {
					return fmt.Errorf("scope %s: remembered %v above fence %v", k, a.Fence, rec.Fence)
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Errorf("store check: %v", err)
	}
}

func cmd(id, act string, token, seq uint64, s fence.State) fence.Command {
	return fence.Command{ID: id, Actuator: act, Holder: "h-" + id, Fence: fence.Fence{Token: token, Seq: seq}, State: s}
}

func admit(t *testing.T, l *Store, scope string, c fence.Command, want fence.Outcome) Admission {
	t.Helper()
	adm, err := l.Admit(scope, c, fence.Rules{}, nil)
	if err != nil {
		t.Fatalf("Admit(%s, %+v) error: %v", scope, c, err)
	}
	if adm.Outcome != want {
		t.Fatalf("Admit(%s, %+v) = %v (%s), want %v", scope, c, adm.Outcome, adm.Error, want)
	}
	return adm
}

func TestAdmitSequence(t *testing.T) {
	l, _ := openLog(t, nil)
	on, off := fence.StateOn, fence.StateOff
	admit(t, l, "pump", cmd("a-1", "pump", 41, 0, on), fence.Applied)
	adm := admit(t, l, "pump", cmd("b-1", "pump", 42, 0, off), fence.Applied)
	if adm.Output.State != off || adm.Output.Fence != (fence.Fence{Token: 42}) || adm.Output.Holder != "h-b-1" {
		t.Errorf("after b-1: output = %+v, want off at 42/0 held by h-b-1", adm.Output)
	}
	// A wakes with its old token: stale, and the answer carries B's fence and state.
	adm = admit(t, l, "pump", cmd("a-2", "pump", 41, 1, on), fence.Stale)
	if adm.Output.State != off || adm.Output.Fence.Token != 42 {
		t.Errorf("stale answer output = %+v, want off at 42", adm.Output)
	}
	admit(t, l, "pump", cmd("b-2", "pump", 42, 1, on), fence.Applied)
	admit(t, l, "pump", cmd("b-1", "pump", 42, 0, off), fence.Duplicate) // late redelivery
	admit(t, l, "pump", cmd("b-x", "pump", 42, 1, on), fence.Stale)      // same pair, other id
	// Fence-only raises the fence, keeps the state.
	adm = admit(t, l, "pump", cmd("c-0", "pump", 50, 0, fence.StateNone), fence.Applied)
	if adm.Output.State != on || adm.Output.Fence.Token != 50 {
		t.Errorf("after fence-only: output = %+v, want on at 50", adm.Output)
	}
	admit(t, l, "pump", cmd("b-3", "pump", 42, 2, off), fence.Stale)
	// Scopes are independent.
	admit(t, l, "valve", cmd("v-1", "valve", 1, 0, on), fence.Applied)
}

func TestPersistsAcrossReopen(t *testing.T) {
	l, path := openLog(t, nil)
	admit(t, l, "climate", cmd("b-1", "fan", 42, 0, fence.StateOn), fence.Applied)
	admit(t, l, "climate", cmd("b-2", "heater", 42, 1, fence.StateOff), fence.Applied)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(path, &Options{AuditFlush: -1})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer l2.Close()
	admit(t, l2, "climate", cmd("a-1", "heater", 41, 5, fence.StateOn), fence.Stale)
	admit(t, l2, "climate", cmd("b-1", "fan", 42, 0, fence.StateOn), fence.Duplicate)
	out, err := l2.Output("climate", "fan")
	if err != nil || out.State != fence.StateOn || out.Fence != (fence.Fence{Token: 42, Seq: 1}) {
		t.Errorf("Output(climate, fan) = %+v, %v; want on at 42/1", out, err)
	}
	f, err := l2.Fences()
	if err != nil || f["climate"] != (fence.Fence{Token: 42, Seq: 1}) {
		t.Errorf("Fences() = %v, %v; want climate 42/1", f, err)
	}
}

func TestOpenRefusesToGuess(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "sub", "fence.db")
	if _, err := Open(missing, nil); !errors.Is(err, ErrNotExist) {
		t.Errorf("Open(missing) = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Errorf("Open(missing) created its directory")
	}

	// A zero-length file is a store that was truncated or never written,
	// never a place for a fresh store: not even with Create (run --init),
	// which would otherwise initialise it and accept any token.
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	for _, create := range []*Birth{nil, Fresh()} {
		if _, err := Open(empty, &Options{Create: create}); !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "0 bytes") {
			t.Errorf("Open(empty file, Create=%v) = %v, want ErrEmpty", create, err)
		}
		if fi, _ := os.Stat(empty); fi.Size() != 0 {
			t.Fatalf("Open(empty file, Create=%v) wrote %d bytes to it", create, fi.Size())
		}
	}

	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 1000)), 0o600)
	if _, err := Open(garbage, nil); err == nil {
		t.Error("Open(garbage) succeeded")
	}

	foreign := filepath.Join(dir, "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
	db.Close()
	for _, create := range []*Birth{nil, Fresh()} {
		if _, err := Open(foreign, &Options{Create: create}); !errors.Is(err, ErrNotStore) {
			t.Errorf("Open(foreign bbolt, Create=%v) = %v, want ErrNotStore", create, err)
		}
	}

	l, err := Open(missing, &Options{Create: Fresh()})
	if err != nil {
		t.Fatalf("Open(missing, Create) = %v", err)
	}
	if _, err := Open(missing, &Options{Timeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open of a held store = %v, want ErrLocked", err)
	}
	l.Close()
	// --init on an existing store keeps it.
	l, err = Open(missing, &Options{Create: Fresh()})
	if err != nil {
		t.Fatal(err)
	}
	admit(t, l, "s", cmd("1", "a", 7, 0, fence.StateOn), fence.Applied)
	l.Close()
	l, err = Open(missing, &Options{Create: Fresh()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	admit(t, l, "s", cmd("2", "a", 6, 0, fence.StateOn), fence.Stale)
}

func TestAuditBounded(t *testing.T) {
	l, _ := openLog(t, &Options{AuditLimit: 10, AuditFlush: -1})
	for i := range 25 {
		admit(t, l, "s", cmd(fmt.Sprint("a", i), "x", uint64(i+1), 0, fence.StateOn), fence.Applied)
		admit(t, l, "s", cmd(fmt.Sprint("s", i), "x", 1, 0, fence.StateOff), fence.Stale)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	es, err := l.Audit(100)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 10 {
		t.Fatalf("Audit(100) returned %d entries, want 10 (the limit)", len(es))
	}
	last := es[len(es)-1]
	if last.ID != "s24" || last.Outcome != fence.Stale || last.Fence.Token != 25 || last.Error == "" {
		t.Errorf("newest audit entry = %+v, want stale s24 at fence 25 with a reason", last)
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq {
			t.Errorf("audit out of order: seq %d after %d", es[i].Seq, es[i-1].Seq)
		}
	}
	var n int
	l.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucketAudit).Stats().KeyN; return nil })
	if n != 10 {
		t.Errorf("audit bucket holds %d entries, want 10", n)
	}
}

// A flood of stale and duplicate commands must not cost a write (an fsync)
// each: they are decided read-only and audited in one later write.
func TestStaleFloodWritesOnce(t *testing.T) {
	l, _ := openLog(t, nil)
	admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Applied)
	writes := func() int64 { st := l.db.Stats(); return st.TxStats.GetWrite() }
	before := writes()
	for i := range 1000 {
		admit(t, l, "s", cmd(fmt.Sprint("a", i), "x", 41, uint64(i), fence.StateOff), fence.Stale)
		admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Duplicate)
	}
	if got := writes() - before; got != 0 {
		t.Fatalf("2000 stale/duplicate decisions made %d page writes, want 0", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	es, _ := l.Audit(3000)
	if len(es) != 2001 {
		t.Errorf("audit has %d entries, want 2001", len(es))
	}
}

func TestBackgroundFlush(t *testing.T) {
	l, _ := openLog(t, &Options{AuditFlush: 20 * time.Millisecond})
	admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Applied)
	admit(t, l, "s", cmd("a", "x", 41, 0, fence.StateOn), fence.Stale)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		l.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucketAudit).Stats().KeyN; return nil })
		if n == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("buffered audit entry not flushed: %d entries on disk, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Concurrent admissions to one scope without any outside lock: the decision
// inside the write transaction keeps the fence strictly increasing and
// admits each pair at most once.
func TestConcurrentAdmitsNeverRegress(t *testing.T) {
	l, _ := openLog(t, nil)
	var mu sync.Mutex
	var applied []fence.Fence
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				tok := uint64((i*7+g*13)%50 + 1)
				adm, err := l.Admit("s", cmd(fmt.Sprint(g, "-", i), "x", tok, uint64(g), fence.StateOn), fence.Rules{}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if adm.Outcome == fence.Applied {
					mu.Lock()
					applied = append(applied, adm.Output.Fence)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	seen := map[fence.Fence]bool{}
	var max fence.Fence
	for _, f := range applied {
		if seen[f] {
			t.Errorf("pair %v applied twice", f)
		}
		seen[f] = true
		if max.Less(f) {
			max = f
		}
	}
	fs, _ := l.Fences()
	if fs["s"] != max {
		t.Errorf("fence = %v, want the highest applied %v", fs["s"], max)
	}
}

// TestDiskFull fills a small real filesystem until a commit fails: the
// command is not admitted, the store refuses further writes, and after a
// reopen the fence is what was durably recorded before.
func TestDiskFull(t *testing.T) {
	dir := testenv.SmallFS(t, "256k")
	path := filepath.Join(dir, "fence.db")
	l, err := Open(path, &Options{Create: Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Applied)
	testenv.Fill(t, dir)

	var failed error
	holder := strings.Repeat("h", 100)
	for i := range 2000 {
		c := cmd(fmt.Sprint("c", i), fmt.Sprint("act", i), 43+uint64(i), 0, fence.StateOn)
		c.Holder = holder
		if _, err := l.Admit(fmt.Sprint("scope", i), c, fence.Rules{}, nil); err != nil {
			failed = err
			break
		}
	}
	if failed == nil {
		t.Fatal("no commit failed on a full filesystem")
	}
	if !errors.Is(failed, ErrBroken) {
		t.Errorf("failed Admit error = %v, want ErrBroken", failed)
	}
	select {
	case <-l.Broken():
	default:
		t.Error("Broken() not closed after a failed commit")
	}
	if _, err := l.Admit("s", cmd("b2", "x", 99, 0, fence.StateOff), fence.Rules{}, nil); !errors.Is(err, ErrBroken) {
		t.Errorf("Admit after a failed commit = %v, want ErrBroken", err)
	}
	l.Close()
	os.Remove(filepath.Join(dir, "filler"))
	l, err = Open(path, &Options{AuditFlush: -1})
	if err != nil {
		t.Fatalf("reopen after disk full: %v", err)
	}
	defer l.Close()
	fs, _ := l.Fences()
	if fs["s"] != (fence.Fence{Token: 42}) {
		t.Errorf("fence of s after disk full = %v, want 42/0", fs["s"])
	}
	admit(t, l, "s", cmd("a", "x", 41, 0, fence.StateOn), fence.Stale)
}

func ExampleStore_Admit() {
	dir, _ := os.MkdirTemp("", "fencelog")
	defer os.RemoveAll(dir)
	l, _ := Open(filepath.Join(dir, "fence.db"), &Options{Create: Fresh()})
	defer l.Close()

	b := fence.Command{ID: "b-7", Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOff}
	a := fence.Command{ID: "a-1", Actuator: "pump", Fence: fence.Fence{Token: 41}, State: fence.StateOn}
	for _, c := range []fence.Command{b, a, b} {
		adm, _ := l.Admit("pump", c, fence.Rules{}, nil)
		fmt.Println(c.ID, adm.Outcome, adm.Output.Fence)
	}
	// Output:
	// b-7 applied 42/0
	// a-1 stale 42/0
	// b-7 duplicate 42/0
}

// No clock decides: with the wall clock jumping back to 1970 (a Pi before
// NTP) and forward again, every decision is what the pairs alone say.
func TestClockDoesNotDecide(t *testing.T) {
	times := []time.Time{time.Unix(0, 0), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(5, 0)}
	var i int
	l, _ := openLog(t, &Options{AuditFlush: -1, Now: func() time.Time { i++; return times[i%len(times)] }})
	admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Applied)
	admit(t, l, "s", cmd("a", "x", 41, 0, fence.StateOff), fence.Stale)
	admit(t, l, "s", cmd("c", "x", 43, 0, fence.StateOff), fence.Applied)
	admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Duplicate)
	admit(t, l, "s", cmd("d", "x", 42, 9, fence.StateOn), fence.Stale)
}

// Regrouping actuators never lowers the fence they are behind.
func TestBindCarriesFences(t *testing.T) {
	l, _ := openLog(t, nil)
	if moved, err := l.Bind(map[string]string{"fan": "fan", "heater": "heater"}); err != nil || len(moved) != 0 {
		t.Fatalf("first Bind = %v, %v; want nothing moved", moved, err)
	}
	admit(t, l, "fan", cmd("b", "fan", 42, 0, fence.StateOn), fence.Applied)
	admit(t, l, "heater", cmd("c", "heater", 7, 0, fence.StateOn), fence.Applied)
	// Now interlock them in one scope "climate".
	moved, err := l.Bind(map[string]string{"fan": "climate", "heater": "climate"})
	if err != nil || strings.Join(moved, ",") != "fan,heater" {
		t.Fatalf("Bind into climate = %v, %v; want fan and heater moved", moved, err)
	}
	admit(t, l, "climate", cmd("a", "heater", 41, 0, fence.StateOff), fence.Stale)
	out, _ := l.Output("climate", "fan")
	if out.State != fence.StateOn || out.Fence.Token != 42 {
		t.Errorf("fan after the move = %+v, want on at fence 42", out)
	}
	if moved, _ := l.Bind(map[string]string{"fan": "climate", "heater": "climate"}); len(moved) != 0 {
		t.Errorf("unchanged Bind moved %v", moved)
	}
	es, _ := l.Audit(100)
	var n int
	for _, e := range es {
		if e.Outcome == fence.OutcomeMoved && strings.HasPrefix(e.Why, `moved from scope "`) && e.Error == "" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("audit trail has %d moved entries, want 2: %+v", n, es)
	}
}

// An interlock's effect is recorded in the fence's own transaction: a
// refusal raises the fence and changes no state, and its redelivery is a
// duplicate that carries the refusal; break-before-make records every
// state of the effect at once, with audit entries for the others.
func TestAdmitEffects(t *testing.T) {
	l, path := openLog(t, nil)
	g := &fence.Interlock{Name: "vent", Members: []string{"open", "close"}}
	plan := func(c fence.Command) Planner {
		return func(rec ScopeRecord) fence.Effect {
			states := rec.States()
			return g.Effect(c, func(a string) bool { return states[a] == fence.StateOn })
		}
	}
	if adm, err := l.Admit("vent", cmd("b-1", "close", 41, 0, fence.StateOn), fence.Rules{}, plan(cmd("b-1", "close", 41, 0, fence.StateOn))); err != nil || adm.Effect.Refusal != nil {
		t.Fatalf("close on = %+v, %v", adm, err)
	}
	open := cmd("b-2", "open", 42, 0, fence.StateOn)
	adm, err := l.Admit("vent", open, fence.Rules{}, plan(open))
	if err != nil || adm.Outcome != fence.Applied || adm.Effect.Refusal == nil || adm.Effect.Refusal.Blocker != "close" {
		t.Fatalf("open on while close is on = %+v, %v; want applied with a refusal naming close", adm, err)
	}
	if adm.Record.Fence != open.Fence || adm.Record.Output("open").State != fence.StateNone || adm.Record.Output("close").State != fence.StateOn {
		t.Errorf("after the refusal: fence %s, open %s, close %s; want fence 42/0, open unset, close on",
			adm.Record.Fence, adm.Record.Output("open").State, adm.Record.Output("close").State)
	}
	// The refused pair is now the fence: its holder's older token is stale.
	admit(t, l, "vent", cmd("a-1", "close", 41, 1, fence.StateOff), fence.Stale)
	// A redelivery of the refused command is a duplicate carrying the refusal.
	if d := admit(t, l, "vent", open, fence.Duplicate); d.Original == nil || d.Original.Refused == nil || d.Original.Refused.Reason != fence.ReasonInterlock {
		t.Errorf("redelivery of the refused command = %+v, want a duplicate of a refusal", d.Decision)
	}

	g.BreakBeforeMake = true
	open2 := cmd("b-3", "open", 42, 1, fence.StateOn)
	adm, err = l.Admit("vent", open2, fence.Rules{}, plan(open2))
	if err != nil || adm.Effect.Refusal != nil || fmt.Sprint(adm.Effect.Sets) != "[{close off 0 0} {open on 0 0}]" {
		t.Fatalf("break-before-make = %+v, %v; want close off, then open on", adm.Effect, err)
	}
	l.Close()
	l2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	sc, _ := l2.ScopeRecord("vent")
	if sc.Output("open").State != fence.StateOn || sc.Output("close").State != fence.StateOff || sc.Fence != open2.Fence {
		t.Errorf("after reopen: open %s, close %s, fence %s; want on, off, 42/1", sc.Output("open").State, sc.Output("close").State, sc.Fence)
	}
	es, _ := l2.Audit(3)
	if last := es[len(es)-1]; last.Outcome != fence.OutcomeInterlock || last.Actuator != "close" || last.State != fence.StateOff ||
		last.Why != "switched off by open's command (break-before-make)" || last.Error != "" {
		t.Errorf("last audit entry = %+v, want close switched off by the interlock, saying why", last)
	}
}

// Close may be called twice, also at once, and nothing is buffered after
// it.
func TestCloseTwiceAndRecordAfterClose(t *testing.T) {
	l, _ := openLog(t, &Options{AuditFlush: time.Millisecond})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = l.Close() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Close #%d = %v", i, err)
		}
	}
	if err := l.Record(Entry{Actuator: "pump", Outcome: fence.Stale}); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Admit("s", cmd("x", "pump", 1, 0, fence.StateOn), fence.Rules{}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Admit after Close = %v, want ErrClosed", err)
	}
}

// A read-only open reads everything and changes nothing: not the file,
// not the fence.
func TestReadOnly(t *testing.T) {
	l, path := openLog(t, nil)
	admit(t, l, "s", cmd("b", "pump", 42, 0, fence.StateOn), fence.Applied)
	id := l.ID()
	l.Close()
	before, _ := os.ReadFile(path)
	ro, err := Open(path, &Options{ReadOnly: true, Create: Fresh()})
	if err != nil {
		t.Fatal(err)
	}
	if ro.ID() != id || id == "" {
		t.Errorf("read-only ID = %q, want the store's %q", ro.ID(), id)
	}
	if f, _ := ro.Fences(); f["s"] != (fence.Fence{Token: 42}) {
		t.Errorf("read-only Fences = %v", f)
	}
	if _, err := ro.Admit("s", cmd("c", "pump", 43, 0, fence.StateOff), fence.Rules{}, nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Admit = %v, want ErrReadOnly", err)
	}
	if err := ro.Record(Entry{Actuator: "pump"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Record = %v, want ErrReadOnly", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a read-only open changed the store file")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), &Options{ReadOnly: true, Create: Fresh()}); !errors.Is(err, ErrNotExist) {
		t.Errorf("read-only Open of a missing store = %v, want ErrNotExist (read-only never creates)", err)
	}
}

// Every store has an identity of its own that survives reopening.
func TestStoreID(t *testing.T) {
	a, pa := openLog(t, nil)
	b, _ := openLog(t, nil)
	if a.ID() == "" || a.ID() == b.ID() {
		t.Fatalf("IDs %q and %q: want two different, non-empty ids", a.ID(), b.ID())
	}
	id := a.ID()
	a.Close()
	a2, err := Open(pa, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if a2.ID() != id {
		t.Errorf("ID after reopen = %q, want %q", a2.ID(), id)
	}
}

// A truncated store is reported as damaged, with what is missing, instead
// of crashing the process on a page past the end of the mapped file.
func TestOpenDamagedStore(t *testing.T) {
	l, path := openLog(t, nil)
	for i := range 50 {
		admit(t, l, fmt.Sprint("s", i), cmd(fmt.Sprint(i), "pump", 1, 0, fence.StateOn), fence.Applied)
	}
	l.Close()
	whole, _ := os.ReadFile(path)
	for _, size := range []int{len(whole) / 2, 8192, 4096, 100} {
		cut := filepath.Join(t.TempDir(), "cut.db")
		os.WriteFile(cut, whole[:size], 0o600)
		for _, ro := range []bool{false, true} {
			_, err := Open(cut, &Options{ReadOnly: ro})
			if !errors.Is(err, ErrDamaged) {
				t.Errorf("Open(store cut to %d bytes, ReadOnly=%v) = %v, want ErrDamaged", size, ro, err)
			}
		}
	}
}

// A store of another format version is ErrFormat, read-only or not.
func TestOpenOtherFormat(t *testing.T) {
	l, path := openLog(t, nil)
	l.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, []byte("9")) })
	db.Close()
	for _, ro := range []bool{false, true} {
		if _, err := Open(path, &Options{ReadOnly: ro}); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"9"`) {
			t.Errorf("Open(format 9, ReadOnly=%v) = %v, want ErrFormat", ro, err)
		}
	}
}

// TestStoreFloor: a store is created with a floor
// decision, never without; every token at or below the floor is stale in
// every scope, from the first command and after a reopen.
func TestStoreFloor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fence.db")
	for _, b := range []*Birth{{}, {Floor: 100}, {Floor: 100, Why: "  "}} {
		if l, err := Open(path, &Options{Create: b}); err == nil || !strings.Contains(err.Error(), "no floor decision") {
			if l != nil {
				l.Close()
			}
			t.Fatalf("Open(missing, Create: %+v) = %v, want the floor decision asked for", b, err)
		}
		if _, err := os.Lstat(path); err == nil {
			t.Fatalf("Open(missing, Create: %+v) created the file", b)
		}
	}

	l, err := Open(path, &Options{Create: &Birth{Floor: 100, Why: "--floor 100"}, AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := l.Output("never", "pump"); err != nil || out.Fence != (fence.Fence{Token: 100}) {
		t.Errorf("Output of a scope never commanded = %+v, %v; want the floor 100/0 as its fence", out, err)
	}
	admit(t, l, "pump", cmd("a", "pump", 41, 0, fence.StateOn), fence.Stale)
	admit(t, l, "pump", cmd("b", "pump", 100, 9, fence.StateOn), fence.Stale)
	admit(t, l, "fan", cmd("c", "fan", 100, 0, fence.StateNone), fence.Stale)
	admit(t, l, "pump", cmd("d", "pump", 101, 0, fence.StateOn), fence.Applied)
	// Creating again never changes the floor of an existing store.
	l.Close()
	l, err = Open(path, &Options{Create: Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if b := l.Birth(); b.Floor != 100 || b.Why != "--floor 100" || b.At.IsZero() {
		t.Errorf("Birth after reopen = %+v, want floor 100, --floor 100 and a time", b)
	}
	admit(t, l, "fan", cmd("e", "fan", 99, 0, fence.StateOn), fence.Stale)
	admit(t, l, "fan", cmd("f", "fan", 101, 0, fence.StateOn), fence.Applied)
	fences, err := l.Fences()
	if err != nil || fences["pump"] != (fence.Fence{Token: 101}) || fences["fan"] != (fence.Fence{Token: 101}) {
		t.Errorf("Fences = %v, %v", fences, err)
	}
}

// TestTokenJump: a scope's max_token_jump rejects a
// token too far above its fence, fence-only commands too, and records
// nothing: the fence stays where it was.
func TestTokenJump(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "fence.db"), &Options{Create: &Birth{Floor: 1000, Why: "test"}, AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rules := fence.Rules{MaxJump: 50}
	for _, c := range []struct {
		c    fence.Command
		want fence.Outcome
	}{
		{cmd("a", "pump", 1051, 0, fence.StateOn), fence.Rejected},
		{cmd("b", "pump", fence.MaxToken, 0, fence.StateNone), fence.Rejected},
		{cmd("c", "pump", 1050, 0, fence.StateOn), fence.Applied},
		{cmd("d", "pump", 1101, 0, fence.StateOff), fence.Rejected},
		{cmd("e", "pump", 1100, 0, fence.StateOff), fence.Applied},
	} {
		adm, err := l.Admit("pump", c.c, rules, nil)
		if err != nil || adm.Outcome != c.want {
			t.Fatalf("Admit(%v) = %v (%s), %v; want %v", c.c.Fence, adm.Outcome, adm.Error, err, c.want)
		}
		if c.want == fence.Rejected && adm.Reason != fence.ReasonTokenJump {
			t.Errorf("Admit(%v) reason %q, want %q", c.c.Fence, adm.Reason, fence.ReasonTokenJump)
		}
	}
	if out, _ := l.Output("pump", "pump"); out.Fence != (fence.Fence{Token: 1100}) || out.State != fence.StateOff {
		t.Errorf("after the jumps: %+v, want fence 1100/0 and off", out)
	}
	l.Flush()
	audit, _ := l.Audit(10)
	var rejected int
	for _, e := range audit {
		if e.Outcome == fence.Rejected && e.Reason == fence.ReasonTokenJump {
			rejected++
		}
	}
	if rejected != 3 {
		t.Errorf("audit has %d token-jump rejections, want 3:\n%+v", rejected, audit)
	}
}

// FindAudit selects entries by actuator, outcome, holder and time, the
// newest up to its limit, oldest first, buffered ones included.
func TestFindAudit(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	var at time.Time
	l, _ := openLog(t, &Options{AuditFlush: -1, Now: func() time.Time { return at }})
	for i, c := range []struct {
		c    fence.Command
		want fence.Outcome
	}{
		{cmd("a-1", "pump", 41, 0, fence.StateOn), fence.Applied},  // 07:01
		{cmd("b-1", "pump", 42, 0, fence.StateOff), fence.Applied}, // 07:02
		{cmd("a-2", "pump", 41, 1, fence.StateOn), fence.Stale},    // 07:03, buffered
		{cmd("b-2", "fan", 42, 0, fence.StateOn), fence.Applied},   // 07:04
		{cmd("a-3", "pump", 41, 2, fence.StateOn), fence.Stale},    // 07:05, buffered
	} {
		at = now.Add(time.Duration(i+1) * time.Minute)
		scope := c.c.Actuator
		admit(t, l, scope, c.c, c.want)
	}
	ids := func(q AuditQuery) string {
		t.Helper()
		es, err := l.FindAudit(q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct {
		q    AuditQuery
		want string
	}{
		{AuditQuery{Limit: 10}, "a-1 b-1 a-2 b-2 a-3"},
		{AuditQuery{Limit: 2}, "b-2 a-3"},
		{AuditQuery{Limit: 10, Actuator: "pump"}, "a-1 b-1 a-2 a-3"},
		{AuditQuery{Limit: 10, Outcome: fence.Stale}, "a-2 a-3"},
		{AuditQuery{Limit: 1, Outcome: fence.Stale}, "a-3"},
		{AuditQuery{Limit: 10, Holder: "h-b-1"}, "b-1"},
		{AuditQuery{Limit: 10, Since: now.Add(2 * time.Minute), Until: now.Add(4 * time.Minute)}, "b-1 a-2"},
		{AuditQuery{Limit: 10, Actuator: "valve"}, ""},
	} {
		if got := ids(tt.q); got != tt.want {
			t.Errorf("FindAudit(%+v) = %q, want %q", tt.q, got, tt.want)
		}
	}
}
