//go:build linux

package torture

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// envRecheck names the directory a failed run left (see harness.fatalf)
// for TestTortureRecheck.
const envRecheck = "FENCEGATE_TORTURE_RECHECK"

// recordFile is what the observer saw and when the gateway was down, in
// the directory a failed run leaves.
const recordFile = "observer.json"

// record is recordFile's content.
type record struct {
	Seed    uint64
	Copies  []recordCopy
	Answers []recordAnswer
	Downs   []recordDown
}

type recordCopy struct {
	Key key
	T   int64
}

type recordAnswer struct {
	Key    key
	T      int64
	Answer answer
}

type recordDown struct {
	At, Gone, Online int64
	Clean            bool
}

// saveRecord writes what the observer saw, and the gateway's stops.
func (h *harness) saveRecord(path string) error {
	r := record{Seed: h.seed}
	for k, ts := range h.obs.allCopies() {
		for _, t := range ts {
			r.Copies = append(r.Copies, recordCopy{k, t})
		}
	}
	for k, as := range h.obs.allAnswers() {
		for _, a := range as {
			r.Answers = append(r.Answers, recordAnswer{k, a.t, a.a})
		}
	}
	for _, d := range h.downs {
		r.Downs = append(r.Downs, recordDown{d.at, d.gone, d.online, d.clean})
	}
	b, err := json.Marshal(r)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("torture: save what the observer saw: %w", err)
	}
	return nil
}

// TestTortureRecheck checks again, with this code, the commands and
// answers of a run that failed: the directory it left, named by
// FENCEGATE_TORTURE_RECHECK. It is for the checks themselves: a check
// that was wrong passes after its fix.
func TestTortureRecheck(t *testing.T) {
	dir := os.Getenv(envRecheck)
	if dir == "" {
		t.Skipf("%s names the directory of a failed run to check again", envRecheck)
	}
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", recordFile, err)
	}
	h := &harness{t: t, seed: r.Seed, dir: dir, fences: map[string]pair{}}
	h.obs = &observer{copies: map[key][]int64{}, answers: map[key][]seen{}}
	for _, c := range r.Copies {
		h.obs.copies[c.Key] = append(h.obs.copies[c.Key], c.T)
	}
	for _, a := range r.Answers {
		h.obs.answers[a.Key] = append(h.obs.answers[a.Key], seen{a.T, a.Answer})
	}
	for _, d := range r.Downs {
		h.downs = append(h.downs, down{d.At, d.Gone, d.Online, d.Clean})
	}
	for i, c := range controllers {
		h.ctls = append(h.ctls, &ctlProc{idx: i, resend: c.resend, log: filepath.Join(dir, fmt.Sprintf("ctl%d.jsonl", i)), ops: map[int]*op{}})
	}
	h.checkAnswers("recheck", math.MaxInt64)
	h.checkHistory()
}
