package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestEtcdRestoredFromSnapshot: etcd is restored from a backup
// (etcdctl snapshot save, etcdutl snapshot restore). Restored as it is,
// its revisions go back below the tokens it had already handed out: the
// gateway refuses the new holder (stale: safe), and gateway send and the
// example controller say that the fence is ahead of etcd and how to
// recover, instead of acquiring again and again. Restored with
// --bump-revision and --mark-compacted, as docs/controllers.md says, new
// grants are above every earlier token and pass.
//
// With one grant after the backup, the restored etcd hands out that grant's
// token again: the new holder's token equals the fence (refused, since it
// is not above it), and what is said is that the fence is at the token of
// a lock the holder still holds; the grant after that is above the fence
// and passes, although the lost etcd may have handed out that token too:
// the reason a restore needs the bump. With five, the fence is above
// etcd's revision for the next grants too, and the example controller
// stops.
func TestEtcdRestoredFromSnapshot(t *testing.T) {
	t.Run("one grant after the backup", func(t *testing.T) { testEtcdRestored(t, 1) })
	t.Run("five grants after the backup", func(t *testing.T) { testEtcdRestored(t, 5) })
}

func testEtcdRestored(t *testing.T, after int) {
	etcdctl := testenv.Program(t, "etcdctl")
	etcdutl := testenv.Etcdutl(t)
	cluster := testenv.StartEtcdCluster(t, 1)
	member := cluster.Members[0]
	etcd := cluster.Endpoints()
	broker := testenv.EmbeddedBroker(t)
	latch := gatewayProc(t, broker)
	dir := t.TempDir()
	send := func(state string) (string, int, uint64) {
		t.Helper()
		out, code := runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd, "--ttl", "5", "--timeout", "30s", state)
		m := grantedRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("send --etcd %s: exit %d, no grant:\n%s", state, code, out)
		}
		tok, _ := strconv.ParseUint(m[1], 10, 64)
		return out, code, tok
	}
	revision := func() int64 {
		t.Helper()
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rev, err := lease.Revision(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
	}

	if out, code, _ := send("on"); code != 0 {
		t.Fatalf("first grant: exit %d\n%s", code, out)
	}
	backup := filepath.Join(dir, "backup.db")
	run(etcdctl, "--endpoints", etcd, "snapshot", "save", backup)
	atBackup := revision()
	// Grants after the backup: their tokens are above every revision the
	// backup knows.
	var last uint64
	for i := range after {
		state := []string{"off", "on"}[i%2]
		out, code, tok := send(state)
		if code != 0 {
			t.Fatalf("grant %d after the backup: exit %d\n%s", i, code, out)
		}
		last = tok
	}
	if last <= uint64(atBackup) {
		t.Fatalf("the last token %d is not above the backup's revision %d", last, atBackup)
	}

	// etcd's data is lost; the backup is restored as it is.
	member.Kill()
	plain := filepath.Join(dir, "restored-plain")
	run(etcdutl, append([]string{"snapshot", "restore", backup}, member.RestoreArgs(plain)...)...)
	member.StartOn(plain)
	restored := revision()
	if restored >= int64(last) {
		t.Fatalf("after the plain restore etcd's revision is %d, want it back below the last token %d", restored, last)
	}
	out, code, refused := send("on")
	if code != exitStale || !strings.Contains(out, `"outcome":"stale"`) || !strings.Contains(out, fmt.Sprintf(`"fence":{"token":%d,`, last)) {
		t.Fatalf("a new holder after the plain restore (token %d, fence %d): exit %d, want %d (stale)\n%s", refused, last, code, exitStale, out)
	}
	why := "above every revision this etcd has issued"
	if refused == last {
		why = fmt.Sprintf("at or above the token %d that this etcd has just granted", refused)
	}
	for _, want := range []string{why, "etcdutl snapshot restore --bump-revision", "docs/controllers.md"} {
		if !strings.Contains(out, want) {
			t.Fatalf("gateway send after the plain restore does not say %q:\n%s", want, out)
		}
	}
	if m, _ := boards.ReadLatch(latch); m["GPIO17"] != (after%2 == 0) {
		t.Errorf("the pump's latch is high=%v after the refused holder's on; want the last grant's state", m["GPIO17"])
	}
	if after > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ctl := exec.CommandContext(ctx, exampleController(t), "--etcd", etcd, "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump",
			"--ttl", "2", "--period", "200ms", "--name", testenv.ID(t, "ctl"))
		ctlOut, err := ctl.CombinedOutput()
		if ctx.Err() != nil || err == nil || !strings.Contains(string(ctlOut), "above every revision") || strings.Count(string(ctlOut), "msg=granted") != 1 {
			t.Errorf("the example controller after the plain restore ended with %v, want it to stop after one grant, saying why:\n%s", err, ctlOut)
		}
	}

	// Restored again, with the revision bumped past every token handed out.
	member.Kill()
	bumped := filepath.Join(dir, "restored-bumped")
	const bump = 1000000
	run(etcdutl, append([]string{"snapshot", "restore", backup, "--bump-revision", strconv.Itoa(bump), "--mark-compacted"}, member.RestoreArgs(bumped)...)...)
	member.StartOn(bumped)
	out, code, tok := send("on")
	if code != 0 || !strings.Contains(out, `"outcome":"applied"`) || tok <= last {
		t.Fatalf("a new holder after the restore with --bump-revision %d: token %d (the last before %d), exit %d, want applied\n%s", bump, tok, last, code, out)
	}
	if m, _ := boards.ReadLatch(latch); !m["GPIO17"] {
		t.Error("the pump's latch is low after the applied on")
	}
	_, w := startExampleCtl(t, etcd, broker, "pump", "ctl-after")
	g, _ := strconv.ParseUint(w.wait(t, ctlGranted, 60*time.Second)[1], 10, 64)
	if a := w.wait(t, ctlApplied, 60*time.Second); a[2] != strconv.FormatUint(g, 10) || g <= tok {
		t.Errorf("the example controller after the bumped restore: granted %d, applied under %s; want a token above %d, applied", g, a[2], tok)
	}
	t.Logf("tokens: %d before the restore (the backup at revision %d); the plain restore at revision %d, token %d refused; %d applied after --bump-revision %d",
		last, atBackup, restored, refused, tok, bump)
}
