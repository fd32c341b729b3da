package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/internal/version"
	"github.com/tikali/monky-deployd/states"
)

// envHandover names, in the complete agent's environment, what the heartbeat build handed it:
// "<memfd>,<lock fd>" (a check-in and the held tick lock), or "-" (nothing: the command is
// simply the complete agent's).
const envHandover = "MONKY_DEPLOYD_HANDOVER"

// handedOver is what the complete agent was started with in MONKY_DEPLOYD_HANDOVER.
var handedOver string

// popHandover returns MONKY_DEPLOYD_HANDOVER as this process started with it ("" when unset) and
// removes it at once, whatever the command, so that nothing this process starts sees it.
func popHandover() string {
	v := os.Getenv(envHandover)
	_ = os.Unsetenv(envHandover)
	return v
}

// takeHandover reads what the heartbeat build handed this process (v: popHandover's value). A
// handover from another version keeps the lock and drops the check-in (this tick checks in
// again); an unreadable one is dropped.
func takeHandover(log zerolog.Logger, v string) *states.Handover {
	var mfd, lfd int
	if v == "" || v == "-" {
		return nil
	}
	if _, err := fmt.Sscanf(v, "%d,%d", &mfd, &lfd); err != nil || mfd < 3 || lfd < 3 {
		log.Warn().Msgf("%s=%q is not a handover: ignored", envHandover, v)
		return nil
	}
	syscall.CloseOnExec(mfd)
	syscall.CloseOnExec(lfd)
	mf := os.NewFile(uintptr(mfd), "handover")
	defer mf.Close()
	lock := os.NewFile(uintptr(lfd), "tick lock")
	h := &states.Handover{}
	data, err := io.ReadAll(io.LimitReader(mf, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, h)
	}
	if err != nil {
		log.Warn().Msgf("the heartbeat build's handover is unreadable (%v): this tick checks in itself", err)
		h = &states.Handover{}
	} else if h.Version != version.Version {
		log.Warn().Msgf("the heartbeat build is %s and this agent %s: this tick checks in itself", h.Version, version.Version)
		h = &states.Handover{}
	}
	h.Lock = lock
	return h
}
