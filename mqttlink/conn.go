package mqttlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/internal/pahosec"
	"github.com/fencegate/fencegate/mqttsec"
)

// Status is the state of a gateway's broker connection, for people and
// for GET /api/status.
type Status struct {
	Broker   string
	ClientID string
	// Connected is true while the MQTT connection is up.
	Connected bool
	// Since is when Connected last changed (or the link started).
	Since time.Time
	// Subscribed is true while commands are taken: subscribed, and no other
	// process serves the gateway id.
	Subscribed bool
	// LastError is the newest reason a connection attempt, the connection
	// or a subscription failed, and LastErrorAt when; kept after recovery.
	LastError   string
	LastErrorAt time.Time
	// Failures counts failed attempts since the last successful connection.
	Failures int
	// Connects counts the connections made since the link started, and
	// FailedAttempts every failed attempt since then.
	Connects, FailedAttempts int
	// Conflict names the other process serving the gateway id, if one was
	// found; the gateway then takes no commands.
	Conflict string
	// Poison counts the commands acknowledged without their answer because
	// the broker closed the connection each time it was written (see
	// poisonGuard); LastPoison describes the newest, LastPoisonAt when.
	Poison       int
	LastPoison   string
	LastPoisonAt time.Time
}

// repeatEvery is how often a failure that keeps repeating with the same
// reason is logged again.
const repeatEvery = time.Minute

// takeoverWindow: a connection the broker closes this soon after accepting
// it, twice in a row, was most likely taken over by another client with the
// same client id.
const takeoverWindow = 5 * time.Second

// connState tracks the connection and logs its changes without flooding:
// the first failure, every change of reason, and a reminder per minute.
type connState struct {
	log     *slog.Logger
	gateway string
	set     mqttsec.Settings

	mu         sync.Mutex // guards the fields below
	st         Status
	loggedAt   time.Time // when the current run of failures was last logged
	loggedWhy  string
	upAt       time.Time // when the current connection came up
	quickLoss  int       // losses within takeoverWindow of the connect, in a row
	downSince  time.Time
	everOnline bool
	drops      int
	dropLogged time.Time
	refetch    int // commands dropped that the link reconnects to receive again
}

func newConnState(set mqttsec.Settings, clientID, gateway string, log *slog.Logger) *connState {
	now := time.Now()
	return &connState{log: log, gateway: gateway, set: set, downSince: now,
		st: Status{Broker: set.Broker, ClientID: clientID, Since: now}}
}

func (s *connState) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// failed records a failed connection attempt.
func (s *connState) failed(err error) {
	why := explain(err, s.set)
	if pahosec.IsEOF(err) && !strings.Contains(why, "TLS") {
		why += " before it answered (if that port is the broker's TLS listener, use ssl:// in " + s.set.Names.Broker + ")"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Failures++
	s.st.FailedAttempts++
	s.fail(why)
	switch {
	case s.st.Failures == 1 || why != s.loggedWhy:
		s.log.Error("cannot connect to the broker", "broker", s.st.Broker, "reason", why)
	case time.Since(s.loggedAt) >= repeatEvery:
		s.log.Error("still cannot connect to the broker", "broker", s.st.Broker, "reason", why,
			"attempts", s.st.Failures, "since", s.downSince.Format(time.RFC3339))
	default:
		return
	}
	s.loggedAt, s.loggedWhy = time.Now(), why
}

func (s *connState) fail(why string) {
	s.st.LastError, s.st.LastErrorAt = why, time.Now()
}

func (s *connState) connected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.st.Failures > 0 || s.everOnline {
		s.log.Info("connected to the broker", "broker", s.st.Broker, "client_id", s.st.ClientID,
			"after", now.Sub(s.downSince).Round(time.Millisecond).String(), "failed_attempts", s.st.Failures)
	} else {
		s.log.Info("connected to the broker", "broker", s.st.Broker, "client_id", s.st.ClientID)
	}
	s.everOnline = true
	s.st.Connected, s.st.Since, s.st.Failures = true, now, 0
	s.st.Connects++
	s.upAt = now
	s.loggedWhy = ""
}

// lost records a lost connection and reports whether the broker closed it
// within takeoverWindow of accepting it (a take-over, most likely).
// blame, if not empty, says which answers the broker may have closed it
// on (see poisonGuard.lost): such a loss is not counted as a take-over
// (the instance guard's claims still find another process).
func (s *connState) lost(err error, blame string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	quick := now.Sub(s.upAt) < takeoverWindow && s.refetch == 0 && blame == ""
	if quick {
		s.quickLoss++
	} else {
		s.quickLoss = 0
	}
	why := "connection lost: " + explain(err, s.set)
	if s.refetch > 0 {
		why = fmt.Sprintf("reconnecting: the link closed its connection to receive again the %d commands dropped while its backlog was full", s.refetch)
		s.refetch = 0
	} else if s.quickLoss >= 2 && pahosec.IsEOF(err) {
		why = fmt.Sprintf("the broker closed the connection %s after accepting it, %d times in a row: another client with client id %q "+
			"took over the session; is another gateway running with id %q (or mqtt.client_id)? Give each gateway its own id",
			now.Sub(s.upAt).Round(time.Millisecond), s.quickLoss, s.st.ClientID, s.gateway)
	} else if blame != "" {
		why += ": " + blame
	}
	s.fail(why)
	s.st.Connected, s.st.Subscribed, s.st.Since = false, false, now
	s.downSince = now
	if why != s.loggedWhy || time.Since(s.loggedAt) >= repeatEvery {
		s.log.Warn("broker connection lost", "broker", s.st.Broker, "reason", why)
		s.loggedAt, s.loggedWhy = now, why
	}
	// One quick loss may be a broker restarting; two in a row are another
	// client taking the session back and forth.
	return quick && pahosec.IsEOF(err) && s.quickLoss >= 2
}

// dropped notes a command dropped because the backlog was full.
func (s *connState) dropped(actuator string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops++
	if time.Since(s.dropLogged) >= repeatEvery || s.drops == 1 {
		s.log.Warn("commands dropped: the backlog of commands not yet decided is full; they stay unacknowledged, "+
			"and the link reconnects to receive them again once the backlog is empty",
			"actuator", actuator, "dropped", s.drops, "backlog_bytes", backlogBytes)
		s.dropLogged = time.Now()
	}
}

// refetching notes that the link closes its connection so that the broker
// delivers again the n commands dropped from a full backlog.
func (s *connState) refetching(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refetch = n
}

func (s *connState) subscribeFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	why := err.Error()
	s.fail(why)
	if why != s.loggedWhy || time.Since(s.loggedAt) >= repeatEvery {
		s.log.Error("not taking commands", "reason", why)
		s.loggedAt, s.loggedWhy = time.Now(), why
	}
}

func (s *connState) subscribed(filter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Subscribed = true
	s.loggedWhy = ""
	s.log.Info("taking commands", "subscribed", filter)
}

func (s *connState) conflict(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Conflict, s.st.Subscribed = why, false
	s.fail(why)
}

// settings returns o.Settings completed from o: the broker URL, the user
// name, and the gateway configuration's names by default.
func settings(o Options) mqttsec.Settings {
	s := o.Settings
	if s.Names == (mqttsec.Names{}) {
		s.Names = mqttsec.GatewayNames()
	}
	if s.Broker == "" {
		s.Broker = o.Broker
	}
	if s.Username == "" {
		s.Username = o.Username
	}
	if s.PasswordFrom == "" && o.Password != "" {
		s.PasswordFrom = "mqtt.password"
	}
	return s
}

// explain turns a connection error into a reason a person can act on.
func explain(err error, s mqttsec.Settings) string {
	if why := pahosec.Explain(err, s); why != "" {
		return why
	}
	if err == nil {
		return "unknown"
	}
	return err.Error()
}

// Probe connects to the broker once, as o describes (Broker, Username,
// Password, TLS, Settings, ClientID; a clean session, so it disturbs no
// gateway's session), and disconnects. Its error says why the broker did
// not accept the connection, as the gateway's log would.
func Probe(ctx context.Context, o Options) error {
	co := mqtt.NewClientOptions().AddBroker(o.Broker).SetClientID(o.ClientID).
		SetUsername(o.Username).SetPassword(o.Password).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
	pahosec.SetTLS(co, o.TLS)
	c := mqtt.NewClient(co)
	tok := c.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := tok.Error(); err != nil {
		return errors.New(explain(err, settings(o)))
	}
	c.Disconnect(100)
	return nil
}
