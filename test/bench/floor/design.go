//go:build design

// The design floor: what every heartbeat of this design must do beyond the floor's check-in,
// done the plainest way its libraries allow. No check of the state file, no journal format,
// no metrics written (the bench configures no textfile for the agent either): only the
// libraries' inits and pages, the config, the lock and the two bbolt transactions.

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/distribution/reference"
	"github.com/hashicorp/vault/api"
	"github.com/looplab/fsm"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/journald"
	"github.com/urfave/cli/v2"
	bolt "go.etcd.io/bbolt"
	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/phase"
)

// every third-party library the agent links is linked here, and its packages initialised, as
// in the agent (test/bench's TestDesignFloorLinksTheAgentsLibraries holds the two lists equal):
// the textfile's encoder, OpenBao's client, compose's loader and the image reference parser, so
// that "agent / design floor" is the price of the agent's own code
var (
	_ = expfmt.MetricFamilyToText
	_ = dto.MetricType_GAUGE
	_ = api.NewClient
	_ = loader.LoadWithContext
	_ = reference.ParseNormalizedNamed
	_ = journald.NewJournalDWriter
)

// mandates holds the design floor's flags, its logger and the tick lock.
type mandates struct {
	config, state *string
	log           zerolog.Logger
	lock          *os.File
}

func designFlags() *mandates {
	return &mandates{
		config: flag.String("config", "", "config.yaml"),
		state:  flag.String("state", "", "a directory for the design floor's lock and state file"),
	}
}

// before is the work ahead of the check-in: the cli app, config.yaml, the logger, the state
// machine's table, the tick lock, one read transaction.
func (m *mandates) before() error {
	app := &cli.App{Name: "floor", HideHelp: true, Action: func(*cli.Context) error { return nil }}
	if err := app.Run([]string{"floor"}); err != nil {
		return err
	}
	raw, err := os.ReadFile(*m.config)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	m.log = zerolog.New(os.Stderr).Level(zerolog.InfoLevel)
	_ = fsm.NewFSM("idle", fsm.Events{{Name: "checkin", Src: []string{"idle"}, Dst: "checked-in"}}, nil)
	phase.Mark("config")
	if m.lock, err = os.OpenFile(filepath.Join(*m.state, "lock"), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return err
	}
	if err := syscall.Flock(int(m.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return err
	}
	phase.Mark("lock")
	db, err := bolt.Open(filepath.Join(*m.state, "state.db"), 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if errors.Is(err, os.ErrNotExist) {
		return nil // the first run: after() makes it
	}
	if err != nil {
		return err
	}
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("state")); b != nil {
			var rec map[string]any
			if v := b.Get([]byte("record")); v != nil {
				return json.Unmarshal(v, &rec)
			}
		}
		return nil
	})
	db.Close()
	phase.Mark("state-read")
	return err
}

// pin parses the release's .env with compose's own parser, as the agent does to pin compose ps.
func (m *mandates) pin(dir string) {
	if raw, err := os.ReadFile(filepath.Join(dir, ".env")); err == nil {
		_, _ = dotenv.UnmarshalBytesWithLookup(raw, nil)
	}
}

// after is the tick's one durable write: a journal entry and the record, fsync'd by bbolt.
func (m *mandates) after() error {
	db, err := bolt.Open(filepath.Join(*m.state, "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		st, err := tx.CreateBucketIfNotExists([]byte("state"))
		if err != nil {
			return err
		}
		j, err := tx.CreateBucketIfNotExists([]byte("journal"))
		if err != nil {
			return err
		}
		n, _ := j.NextSequence()
		entry, _ := json.Marshal(map[string]any{"tick": n, "at": time.Now().UTC(), "event": "checkin", "from": "Reported", "to": "Reported"})
		if err := j.Put([]byte(fmt.Sprintf("%016x", n)), entry); err != nil {
			return err
		}
		rec, _ := json.Marshal(map[string]any{"state": "Reported", "tick": n, "last_checkin_at": time.Now().UTC()})
		return st.Put([]byte("record"), rec)
	})
	phase.Mark("commit")
	m.log.Debug().Msg("tick done")
	return err
}
