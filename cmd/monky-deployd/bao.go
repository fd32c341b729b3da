//go:build !heartbeat

package main

import (
	"net/http"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/states"
)

// heartbeatBuild: this is the complete agent (see heartbeat.go for the other build).
const heartbeatBuild = false

// newBao is the OpenBao client: hashicorp/vault/api's, over the transport's HTTP client.
func newBao(cfg *config.Config, hc *http.Client) (effects.Bao, error) {
	return bao.New(cfg.Bao.Addr, hc, cfg.BaoTimeout())
}

// handOverTo and handOverOthers are the heartbeat build's only.
func handOverTo(*states.Agent) {}
func handOverOthers(*cli.App)  {}
