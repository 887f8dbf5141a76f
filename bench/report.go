package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// Report is one run's figures. Its JSON form (WriteJSON) is for machines;
// WriteTable prints it for people.
type Report struct {
	Version string `json:"version,omitempty"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	CPUs    int    `json:"cpus"`
	// Broker is "embedded" or the broker's URL.
	Broker string `json:"broker"`
	// StoreDir is where the stores and the commit floor's file were;
	// StoreFS its file system, where known (Linux).
	StoreDir string `json:"store_dir"`
	StoreFS  string `json:"store_fs,omitempty"`
	// Floors are measured for every profile but the soak, which runs
	// alone and has none.
	Floors   *Floors  `json:"floors,omitempty"`
	Profiles []Result `json:"profiles"`
	// Notes say what a reader must know to read the figures.
	Notes []string `json:"notes,omitempty"`
}

// Floors are the figures no gateway can beat on this machine, measured in
// the same run.
type Floors struct {
	// BrokerRTT is the broker's QoS 1 round trip without the gateway: a
	// command published to an echo client, whose answer the controller
	// receives, one at a time.
	BrokerRTT Latency `json:"broker_rtt"`
	// Commit is one bbolt commit (with its syncs) in the store's directory.
	Commit Latency `json:"commit"`
	// RoundTripWithCommit is the round trip of an echo that commits (as
	// Commit) before each answer, one command at a time: the two floors
	// composed as a gateway composes them, with nothing else (no fence, no
	// window, no audit, no output). Measured with the single profile.
	RoundTripWithCommit *Latency `json:"round_trip_with_commit,omitempty"`
}

// Result is one profile's figures. Rates and ratios are over the measured
// phase, from its first command to its last answer; pointers are null
// where a figure is unknown on this system or does not apply.
type Result struct {
	Name    string `json:"name"`
	Profile string `json:"profile"`
	// Skipped, if set, says why the profile did not run; no other
	// figure is set then.
	Skipped     string `json:"skipped,omitempty"`
	Actuators   int    `json:"actuators"`
	Controllers int    `json:"controllers"`
	Window      int    `json:"window"`
	// CommitDelayMs is the slowed commit of the sdcard profile.
	CommitDelayMs float64 `json:"commit_delay_ms"`
	// Shared is the shared profile's actuators, which every controller
	// commands; 0 where each controller has an actuator of its own.
	Shared int `json:"shared_actuators,omitempty"`
	// SharedAnswers says that the commands named no reply topic, so that
	// every answer went to the actuator's shared result topic.
	SharedAnswers bool `json:"shared_answers,omitempty"`
	// Seconds is the measured phase's length.
	Seconds float64 `json:"seconds"`
	// Commands are those answered in the measured phase; Outcomes counts
	// them by outcome, Applied those applied.
	Commands    int            `json:"commands"`
	Applied     int            `json:"applied"`
	Outcomes    map[string]int `json:"outcomes"`
	AppliedPerS float64        `json:"applied_per_s"`
	// AnsweredPerS counts every answer: in the shared profile, commands
	// answered stale (a later token was first) are as much work done.
	AnsweredPerS float64 `json:"answered_per_s"`
	// AnswersPerCommand is the answers delivered to the controllers per
	// command answered, theirs and others': 1 when each answer reaches
	// only the controller that asked.
	AnswersPerCommand float64 `json:"answers_per_command"`
	// Latency is from publishing a command to receiving its answer (the
	// storm's: of the calm controllers' fresh commands in the storm).
	Latency Latency `json:"latency"`
	// EchoPerS is the broker's echo throughput with the same controllers
	// and window (floor b); null for the storm.
	EchoPerS *float64 `json:"echo_per_s"`
	// EchoP50Ms and EchoAnswersPerCommand are the echo's p50 latency and
	// answers delivered per command, with the same topology.
	EchoP50Ms             *float64 `json:"echo_p50_ms"`
	EchoAnswersPerCommand *float64 `json:"echo_answers_per_command"`
	// OneCommitPerS is what one commit per command would allow:
	// 1000 / (commit floor p50 + CommitDelayMs).
	OneCommitPerS float64 `json:"one_commit_per_s"`
	// Commits and Writes are the store's commits in the measured phase and
	// the writes they held (from the gateway's GET /api/status);
	// SyncsPerApplied is 2 × Commits / Applied (a bbolt commit syncs
	// twice).
	Commits         uint64  `json:"commits"`
	Writes          uint64  `json:"writes"`
	SyncsPerApplied float64 `json:"syncs_per_applied"`
	// CPUSecondsPer1000 is the gateway process's CPU time (user and
	// system) per 1,000 commands answered, over CPUOver: "measured phase"
	// (Linux), or "process lifetime" (elsewhere: from its exit status,
	// start and warm-up included).
	CPUSecondsPer1000 *float64 `json:"cpu_s_per_1000"`
	CPUOver           string   `json:"cpu_over,omitempty"`
	// PeakRSSMB is the gateway process's peak resident memory; IdleRSSMB
	// its resident memory once online, before any command (Linux only).
	PeakRSSMB *float64 `json:"peak_rss_mb"`
	IdleRSSMB *float64 `json:"idle_rss_mb"`
	// IdleAnonMB is the part of IdleRSSMB that is the process's own
	// memory (heap, stacks, runtime); the rest is the pages of mapped files
	// it touched: the binary (shared with every process running it, and
	// dropped by the kernel first when memory is short) and the store.
	IdleAnonMB *float64 `json:"idle_anon_mb,omitempty"`
	// OnlineMs is the time from starting the process to its "online".
	OnlineMs float64      `json:"online_ms"`
	Ratios   Ratios       `json:"ratios"`
	Storm    *StormResult `json:"storm,omitempty"`
	Soak     *SoakResult  `json:"soak,omitempty"`
}

// Ratios compare a profile's figures with the floors; null where one does
// not apply.
type Ratios struct {
	// P50VsFloor is Latency.P50 / (BrokerRTT.P50 + Commit.P50), for one
	// command at a time (window 1).
	P50VsFloor *float64 `json:"p50_vs_floor"`
	// P50VsComposed is Latency.P50 / RoundTripWithCommit.P50, for one
	// command at a time: what the gateway adds to the composed floor.
	P50VsComposed *float64 `json:"p50_vs_composed,omitempty"`
	// AppliedVsEcho is AppliedPerS / EchoPerS.
	AppliedVsEcho *float64 `json:"applied_vs_echo"`
	// AnsweredVsEcho is AnsweredPerS / EchoPerS, and P50VsEcho
	// Latency.P50 / EchoP50Ms: the gateway against the broker's echo of
	// the same topology under the same load.
	AnsweredVsEcho *float64 `json:"answered_vs_echo"`
	P50VsEcho      *float64 `json:"p50_vs_echo"`
	// AppliedVsOneCommit is AppliedPerS / OneCommitPerS: how many
	// commands share a commit's cost.
	AppliedVsOneCommit float64 `json:"applied_vs_one_commit"`
	// FreshP99VsCalm is the storm's StormP99Ms / CalmP99Ms.
	FreshP99VsCalm *float64 `json:"fresh_p99_vs_calm"`
}

// StormResult is the storm profile's own figures.
type StormResult struct {
	// Flapping controllers send nine stale commands in ten; Calm ones
	// fresh commands only, on scopes of their own.
	Flapping int `json:"flapping"`
	Calm     int `json:"calm"`
	// CalmP99Ms is the calm controllers' p99 without the storm,
	// StormP99Ms with it.
	CalmP99Ms  float64 `json:"calm_p99_ms"`
	StormP99Ms float64 `json:"storm_p99_ms"`
	// StaleSent are the stale commands of the storm, StaleAnswered those
	// answered stale.
	StaleSent     int `json:"stale_sent"`
	StaleAnswered int `json:"stale_answered"`
	// StaleOnly stale commands were then sent alone for StaleOnlySeconds
	// (StaleOnlyStale answered stale), and the store synced
	// StaleOnlySyncs times meanwhile: the background flush of their
	// audit entries (at most once a second), never one per command.
	StaleOnly        int     `json:"stale_only"`
	StaleOnlyStale   int     `json:"stale_only_stale"`
	StaleOnlySeconds float64 `json:"stale_only_seconds"`
	StaleOnlySyncs   uint64  `json:"stale_only_syncs"`
}

func (r *Report) note(format string, a ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, a...)) }

const mib = 1 << 20

func mb(b int64) float64 { return float64(b) / mib }

// phase sets the figures of the measured phase t, between the gateway's
// counters before and after it.
func (res *Result) phase(t *tally, before, after measured) {
	res.Seconds = t.last.Sub(t.first).Seconds()
	res.Outcomes = map[string]int{}
	for k := range t.outcomes {
		for out, n := range t.outcomes[k] {
			res.Outcomes[string(out)] += n
			res.Commands += n
		}
	}
	res.Applied = res.Outcomes["applied"]
	res.AppliedPerS = perSecond(res.Applied, t)
	res.AnsweredPerS = perSecond(res.Commands, t)
	res.Commits = after.commits - before.commits
	res.Writes = after.writes - before.writes
	if res.Applied > 0 {
		res.SyncsPerApplied = 2 * float64(res.Commits) / float64(res.Applied)
	}
}

// usage sets the gateway's CPU time and memory: from /proc over the
// measured phase where it can, else from its exit status, over the
// lifetime commands it answered.
func (res *Result) usage(before, after measured, ps *os.ProcessState, lifetime int) {
	switch {
	case before.useErr == nil && after.useErr == nil && before.use.HaveCPU && res.Commands > 0:
		cpu := after.use.CPU - before.use.CPU
		res.CPUSecondsPer1000 = ptr(cpu.Seconds() / float64(res.Commands) * 1000)
		res.CPUOver = "measured phase"
	case ps != nil && lifetime > 0:
		cpu := ps.UserTime() + ps.SystemTime()
		res.CPUSecondsPer1000 = ptr(cpu.Seconds() / float64(lifetime) * 1000)
		res.CPUOver = "process lifetime"
	}
	if after.useErr == nil && after.use.PeakRSS > 0 {
		res.PeakRSSMB = ptr(mb(after.use.PeakRSS))
	} else if b, ok := exitPeakRSS(ps); ok {
		res.PeakRSSMB = ptr(mb(b))
	}
}

// ratios sets the ratios of res to r's floors.
func (res *Result) ratios(r *Report, delayMs float64) {
	f := r.Floors
	if f == nil {
		f = &Floors{}
	}
	if res.Window == 1 && f.BrokerRTT.P50+f.Commit.P50 > 0 {
		res.Ratios.P50VsFloor = ptr(res.Latency.P50 / (f.BrokerRTT.P50 + f.Commit.P50))
		if c := f.RoundTripWithCommit; c != nil && c.P50 > 0 {
			res.Ratios.P50VsComposed = ptr(res.Latency.P50 / c.P50)
		}
	}
	if res.EchoPerS != nil && *res.EchoPerS > 0 {
		res.Ratios.AppliedVsEcho = ptr(res.AppliedPerS / *res.EchoPerS)
		res.Ratios.AnsweredVsEcho = ptr(res.AnsweredPerS / *res.EchoPerS)
	}
	if res.EchoP50Ms != nil && *res.EchoP50Ms > 0 {
		res.Ratios.P50VsEcho = ptr(res.Latency.P50 / *res.EchoP50Ms)
	}
	if c := f.Commit.P50 + delayMs; c > 0 {
		res.OneCommitPerS = 1000 / c
		res.Ratios.AppliedVsOneCommit = res.AppliedPerS / res.OneCommitPerS
	}
	if s := res.Storm; s != nil && s.CalmP99Ms > 0 {
		res.Ratios.FreshP99VsCalm = ptr(s.StormP99Ms / s.CalmP99Ms)
	}
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r for people: the floors, one line per profile, and
// what each profile's ratios say against the targets.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fs := ""
	if r.StoreFS != "" {
		fs = " (" + r.StoreFS + ")"
	}
	fmt.Fprintf(&b, "gateway bench: %s/%s, %d CPUs, broker %s, store in %s%s\n", r.OS, r.Arch, r.CPUs, r.Broker, r.StoreDir, fs)
	if f := r.Floors; f != nil {
		fmt.Fprintf(&b, "floors: broker round trip p50 %s ms (%d), bbolt commit p50 %s ms (%d)",
			num(f.BrokerRTT.P50), f.BrokerRTT.Samples, num(f.Commit.P50), f.Commit.Samples)
		if c := f.RoundTripWithCommit; c != nil {
			fmt.Fprintf(&b, ", round trip with a commit p50 %s ms (%d)", num(c.P50), c.Samples)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	rows := [][]string{{"profile", "act×ctl×win", "applied/s", "answered/s", "p50 ms", "p99 ms", "p99.9 ms", "echo/s", "vs echo", "answers/cmd", "syncs/applied", "cpu s/1k", "peak MB"}}
	for _, p := range r.Profiles {
		if p.Skipped != "" {
			rows = append(rows, []string{p.Name, "skipped"})
			continue
		}
		vsEcho := p.Ratios.AppliedVsEcho
		if p.Profile == Shared {
			vsEcho = p.Ratios.AnsweredVsEcho
		}
		rows = append(rows, []string{p.Name, fmt.Sprintf("%d×%d×%d", p.Actuators, p.Controllers, p.Window),
			num(p.AppliedPerS), num(p.AnsweredPerS), num(p.Latency.P50), num(p.Latency.P99), num(p.Latency.P999),
			opt(p.EchoPerS), opt(vsEcho), fmt.Sprintf("%.2f", p.AnswersPerCommand), fmt.Sprintf("%.2f", p.SyncsPerApplied), opt(p.CPUSecondsPer1000), opt(p.PeakRSSMB)})
	}
	writeRows(&b, rows)
	b.WriteString("\n")
	for _, p := range r.Profiles {
		for _, line := range p.verdicts(r) {
			fmt.Fprintf(&b, "%-12s %s\n", p.Name+":", line)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// verdicts says what a profile's ratios mean, with the targets
// (for the 2-core development machine).
func (p Result) verdicts(r *Report) []string {
	if p.Skipped != "" {
		return []string{"skipped: " + p.Skipped}
	}
	var v []string
	if x := p.Ratios.P50VsFloor; x != nil && r.Floors != nil {
		v = append(v, fmt.Sprintf("p50 %s ms = %.2f × (broker round trip + commit = %s ms)   target ≤ 1.25",
			num(p.Latency.P50), *x, num(r.Floors.BrokerRTT.P50+r.Floors.Commit.P50)))
		if y := p.Ratios.P50VsComposed; y != nil {
			c := r.Floors.RoundTripWithCommit.P50
			v = append(v, fmt.Sprintf("p50 %s ms = %.2f × the round trip with a commit (%s ms = %.2f × the sum: the floors composed, no gateway)",
				num(p.Latency.P50), *y, num(c), c/(r.Floors.BrokerRTT.P50+r.Floors.Commit.P50)))
		}
	}
	switch p.Profile {
	case Fleet:
		if x := p.Ratios.AppliedVsEcho; x != nil {
			v = append(v, fmt.Sprintf("%s applied/s = %.2f × the broker's echo   target ≥ 0.85", num(p.AppliedPerS), *x))
		}
		v = append(v, fmt.Sprintf("%.2f syncs per applied command   target ≤ 0.25", p.SyncsPerApplied))
		if x := p.CPUSecondsPer1000; x != nil {
			v = append(v, fmt.Sprintf("%.3f CPU s per 1,000 commands (%s)   target ≤ 0.15", *x, p.CPUOver))
		}
		if x := p.PeakRSSMB; x != nil {
			v = append(v, fmt.Sprintf("peak RSS %.1f MB   target ≤ 40", *x))
		}
		v = append(v, fmt.Sprintf("online %.0f ms after start   target ≤ 300 with 64 actuators", p.OnlineMs))
	case Shared:
		how := "each on the reply topic of the controller that asked"
		if p.SharedAnswers {
			how = "on the shared result topics (--shared-answers)"
		}
		if x := p.Ratios.AnsweredVsEcho; x != nil {
			v = append(v, fmt.Sprintf("%s answered/s (%s applied, the rest stale) = %.2f × the broker's echo of the same topology   target ≥ 0.85",
				num(p.AnsweredPerS), num(p.AppliedPerS), *x))
		}
		v = append(v, fmt.Sprintf("%.2f answers delivered per command, %s   target 1", p.AnswersPerCommand, how))
		if x := p.Ratios.P50VsEcho; x != nil {
			v = append(v, fmt.Sprintf("p50 %s ms under load = %.2f × the echo's (%s ms)   target ≤ 1.5", num(p.Latency.P50), *x, num(*p.EchoP50Ms)))
		}
		v = append(v, fmt.Sprintf("%.2f syncs per applied command   target ≤ 0.25", p.SyncsPerApplied))
		if x := p.CPUSecondsPer1000; x != nil {
			v = append(v, fmt.Sprintf("%.3f CPU s per 1,000 commands (%s)   target ≤ 0.15", *x, p.CPUOver))
		}
	case Storm:
		s := p.Storm
		if x := p.Ratios.FreshP99VsCalm; x != nil {
			v = append(v, fmt.Sprintf("calm scopes' p99 %s ms in the storm = %.2f × without it (%s ms)   target ≤ 2",
				num(s.StormP99Ms), *x, num(s.CalmP99Ms)))
		}
		v = append(v, fmt.Sprintf("%d stale commands alone in %.1f s: %d syncs (the audit trail's background flush, at most 2 a second)   target: none per command",
			s.StaleOnly, s.StaleOnlySeconds, s.StaleOnlySyncs))
	case SDCard:
		v = append(v, fmt.Sprintf("%s applied/s with %s ms commits = %.1f × one commit per command (%s/s)   target ≥ 20",
			num(p.AppliedPerS), num(p.CommitDelayMs), p.Ratios.AppliedVsOneCommit, num(p.OneCommitPerS)))
	case Soak:
		v = append(v, p.Soak.verdicts(p)...)
	}
	if p.IdleRSSMB != nil && p.Profile == Single {
		split := ""
		if a := p.IdleAnonMB; a != nil {
			split = fmt.Sprintf(" (%.1f its own, %.1f mapped files: the binary, the store)", *a, *p.IdleRSSMB-*a)
		}
		v = append(v, fmt.Sprintf("idle RSS %.1f MB%s   target ≤ 20; online %.0f ms after start", *p.IdleRSSMB, split, p.OnlineMs))
	}
	if n := p.Commands - p.Applied; n > 0 && p.Profile != Storm && p.Profile != Soak && p.Profile != Shared {
		v = append(v, fmt.Sprintf("WARNING: %d commands not applied: %v", n, p.Outcomes))
	}
	if n := p.Commands - p.Applied - p.Outcomes[string(fence.Stale)]; n > 0 && p.Profile == Shared {
		v = append(v, fmt.Sprintf("WARNING: %d commands neither applied nor stale: %v", n, p.Outcomes))
	}
	return v
}

// num formats a figure with three significant digits or more.
func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3f", x)
	}
}

func opt(x *float64) string {
	if x == nil {
		return "n/a"
	}
	return num(*x)
}

// writeRows writes rows as columns two spaces apart: the first aligned
// left, the others right.
func writeRows(b *strings.Builder, rows [][]string) {
	var width []int
	for _, row := range rows {
		for i, c := range row {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range rows {
		var line strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0:
				line.WriteString(c + pad)
			case i == 1 && len(row) == 2: // a skipped profile
				line.WriteString("  " + c)
			default:
				line.WriteString("  " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}
