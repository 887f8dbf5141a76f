package fencelog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
)

// TestDecisionInsideTransaction: the decision that counts is
// the one taken inside the write transaction. Between the read-only
// decision and the write (the hook), another command raises the fence to
// 43; the command with 42, which the read-only decision found applicable,
// must then be stale, and the fence must stay 43.
func TestDecisionInsideTransaction(t *testing.T) {
	l, _ := openLog(t, nil)
	admit(t, l, "s", cmd("first", "x", 10, 0, fence.StateOn), fence.Applied)
	var ran bool
	testHookAdmitBetween = func() {
		if ran {
			return
		}
		ran = true
		admit(t, l, "s", cmd("b", "x", 43, 0, fence.StateOff), fence.Applied)
	}
	defer func() { testHookAdmitBetween = nil }()
	adm, err := l.Admit("s", cmd("a", "x", 42, 0, fence.StateOn), fence.Rules{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the hook between the read-only decision and the write did not run")
	}
	if adm.Outcome != fence.Stale {
		t.Errorf("42 after 43 committed in between = %v, want stale", adm.Outcome)
	}
	out, _ := l.Output("s", "x")
	if out.Fence != (fence.Fence{Token: 43}) || out.State != fence.StateOff {
		t.Errorf("record = %v %v, want 43/0 off (the newer command's)", out.Fence, out.State)
	}
}

// TestCloseFlushesAudit: Close writes the buffered audit
// entries of stale and duplicate decisions, so a clean stop loses none.
func TestCloseFlushesAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	l, err := Open(path, &Options{Create: Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Applied)
	admit(t, l, "s", cmd("a", "x", 41, 0, fence.StateOff), fence.Stale)
	admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Duplicate)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Audit(10)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, e := range got {
		outcomes = append(outcomes, e.ID+":"+string(e.Outcome))
	}
	if want := "b:applied a:stale b:duplicate"; strings.Join(outcomes, " ") != want {
		t.Errorf("audit after Close = %q, want %q", strings.Join(outcomes, " "), want)
	}
}

// TestStoreGateway: a store records the gateway id it was
// created for (or first opened by, if an older build made it); another id
// is refused with both ids named, read-only too, and nothing is written.
func TestStoreGateway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	l, err := Open(path, &Options{Create: Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	if l.Gateway() != "" {
		t.Errorf("store created without a gateway id records %q", l.Gateway())
	}
	l.Close()
	// An old store gets the id on its first writable open.
	l, err = Open(path, &Options{Gateway: "gw-a", AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	if l.Gateway() != "gw-a" {
		t.Errorf("Gateway() = %q after the first open by gw-a", l.Gateway())
	}
	l.Close()
	for _, ro := range []bool{false, true} {
		_, err := Open(path, &Options{Gateway: "gw-b", ReadOnly: ro})
		if !errors.Is(err, ErrOtherGateway) || !strings.Contains(err.Error(), `"gw-a"`) || !strings.Contains(err.Error(), `"gw-b"`) {
			t.Errorf("Open by gw-b (read-only %v) = %v, want ErrOtherGateway naming gw-a and gw-b", ro, err)
		}
	}
	for _, gw := range []string{"gw-a", ""} {
		l, err := Open(path, &Options{Gateway: gw, ReadOnly: true})
		if err != nil {
			t.Fatalf("Open by %q = %v", gw, err)
		}
		if l.Gateway() != "gw-a" {
			t.Errorf("Gateway() = %q, want gw-a", l.Gateway())
		}
		l.Close()
	}
	created := filepath.Join(t.TempDir(), "new.db")
	l, err = Open(created, &Options{Create: Fresh(), Gateway: "gw-c"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := Open(created, &Options{Gateway: "gw-a"}); !errors.Is(err, ErrOtherGateway) {
		t.Errorf("Open of gw-c's new store by gw-a = %v, want ErrOtherGateway", err)
	}
}

// TestStoreGone: a store deleted or replaced while open fails
// the next commit with ErrBroken and ErrGone (so nothing is driven or
// answered applied) and closes Broken.
func TestStoreGone(t *testing.T) {
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "fence.db")
			l, err := Open(path, &Options{Create: Fresh(), AuditFlush: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			admit(t, l, "s", cmd("b", "x", 42, 0, fence.StateOn), fence.Applied)
			switch how {
			case "deleted":
				os.Remove(path)
			case "replaced":
				b, _ := os.ReadFile(path)
				os.WriteFile(path+".old", b, 0o600)
				os.Rename(path+".old", path)
			}
			admit(t, l, "s", cmd("a", "x", 41, 0, fence.StateOff), fence.Stale) // no write: still answered from the record
			_, err = l.Admit("s", cmd("c", "x", 43, 0, fence.StateOff), fence.Rules{}, nil)
			if !errors.Is(err, ErrBroken) || !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), how) {
				t.Errorf("Admit after the store was %s = %v, want ErrBroken and ErrGone saying it was %s", how, err, how)
			}
			select {
			case <-l.Broken():
			default:
				t.Error("Broken() not closed")
			}
		})
	}
}

// TestOpenDamagedPages: a store whose data pages or scope
// records are damaged is ErrDamaged at Open, read-only or not, and never
// a panic (bbolt panics on some damaged pages when it reads them).
func TestOpenDamagedPages(t *testing.T) {
	l, path := openLog(t, nil)
	for i := range 200 {
		c := cmd(fmt.Sprint(i), "pump", 1, 0, fence.StateOn)
		c.Holder = strings.Repeat("h", 100)
		admit(t, l, fmt.Sprint("s", i), c, fence.Applied)
	}
	l.Close()
	whole, _ := os.ReadFile(path)
	pages := func(b []byte) []byte { // every page after the two meta pages overwritten
		b = bytes.Clone(b)
		copy(b[8192:], bytes.Repeat([]byte{0xff}, len(b)-8192))
		return b
	}
	record := func(b []byte) []byte { // one scope record's JSON made invalid, bbolt's pages intact
		b = bytes.Clone(b)
		i := bytes.Index(b, []byte(`{"fence":{"token":1`))
		if i < 0 {
			t.Fatal("no scope record found in the file")
		}
		b[i] = '['
		return b
	}
	for name, damage := range map[string]func([]byte) []byte{"pages": pages, "record": record} {
		bad := filepath.Join(t.TempDir(), "bad.db")
		os.WriteFile(bad, damage(whole), 0o600)
		for _, ro := range []bool{false, true} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("Open(damaged %s, ReadOnly=%v) panicked: %v", name, ro, r)
					}
				}()
				l, err := Open(bad, &Options{ReadOnly: ro, AuditFlush: -1})
				if err == nil {
					l.Close()
				}
				if !errors.Is(err, ErrDamaged) {
					t.Errorf("Open(damaged %s, ReadOnly=%v) = %v, want ErrDamaged", name, ro, err)
				}
			}()
		}
	}
}

// BenchmarkOpenFullAudit opens a store with a full audit trail (10,000
// entries): what reading every page at start (walk) costs.
func BenchmarkOpenFullAudit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "fence.db")
	l, err := Open(path, &Options{Create: Fresh(), AuditFlush: -1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		l.Record(Entry{Actuator: "pump", ID: fmt.Sprint("id-", i), Holder: "controller-b", Outcome: fence.Stale})
	}
	l.Admit("pump", fence.Command{ID: "b", Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOn}, fence.Rules{}, nil)
	l.Close()
	for b.Loop() {
		l, err := Open(path, &Options{AuditFlush: -1})
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}
