// Package httpapi serves the gateway's read-only JSON API.
//
//	GET /api/actuators   every actuator: recorded state, fence, holder and
//	                     the level read back from its pin
//
// The API never changes anything: commands go over MQTT, where they are
// fenced.
package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

// Source is what the API reads; *actuator.Bank implements it.
type Source interface {
	Statuses() ([]actuator.Status, error)
}

// Actuator is one element of GET /api/actuators.
type Actuator struct {
	Name  string      `json:"name"`
	Scope string      `json:"scope"`
	Pin   string      `json:"pin"`
	State string      `json:"state"` // "on", "off", or "" if never set
	Fence fence.Fence `json:"fence"`
	// Level is the pin's read-back level, "high" or "low"; "" if it could
	// not be read (see LevelError).
	Level      string     `json:"level"`
	LevelError string     `json:"level_error,omitempty"`
	ActiveLow  bool       `json:"active_low"`
	Holder     string     `json:"holder"`
	ChangedAt  *time.Time `json:"changed_at"`
}

// New returns the API handler.
func New(src Source, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/actuators", func(w http.ResponseWriter, r *http.Request) {
		sts, err := src.Statuses()
		if err != nil {
			log.Error("read statuses", "err", err)
			http.Error(w, "cannot read the fence store: "+err.Error(), http.StatusInternalServerError)
			return
		}
		out := make([]Actuator, 0, len(sts))
		for _, s := range sts {
			a := Actuator{Name: s.Actuator, Scope: s.Scope, Pin: s.PinName, State: s.State.String(),
				Fence: s.Fence, ActiveLow: s.ActiveLow, Holder: s.Holder}
			if !s.ChangedAt.IsZero() {
				t := s.ChangedAt
				a.ChangedAt = &t
			}
			switch {
			case s.LevelErr != nil:
				a.LevelError = s.LevelErr.Error()
			case s.High:
				a.Level = "high"
			default:
				a.Level = "low"
			}
			out = append(out, a)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	})
	return mux
}
