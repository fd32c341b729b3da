package main

import (
	"net/http"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/internal/config"
)

// newBao is the OpenBao client: hashicorp/vault/api's, over the transport's HTTP client.
func newBao(cfg *config.Config, hc *http.Client) (effects.Bao, error) {
	return bao.New(cfg.Bao.Addr, hc, cfg.BaoTimeout())
}
