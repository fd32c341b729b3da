package rig

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/states"
)

// Waits sums the wall time spent inside the effects (tenancy, OpenBao, compose, disk): what
// the agent waits for, as opposed to what it does itself. It reads the wall clock on purpose:
// it measures, it decides nothing.
type Waits struct {
	ns atomic.Int64
	// Checkins records when each check-in was sent, when set (the fleet's spread).
	OnCheckin func(sent time.Time, took time.Duration, err error)
}

// Total is the time spent in effects so far.
func (w *Waits) Total() time.Duration { return time.Duration(w.ns.Load()) }

// Reset sets the total back to zero.
func (w *Waits) Reset() { w.ns.Store(0) }

func (w *Waits) since(t time.Time) { w.ns.Add(int64(time.Since(t))) }

// Wrap returns fx with every call timed.
func (w *Waits) Wrap(fx states.Effects) states.Effects {
	return states.Effects{Tenancy: wTenancy{fx.Tenancy, w}, Bao: wBao{fx.Bao, w}, Compose: wCompose{fx.Compose, w}, Disk: wDisk{fx.Disk, w}}
}

type wTenancy struct {
	t effects.Tenancy
	w *Waits
}

func (x wTenancy) Checkin(ctx context.Context, token string, req effects.CheckinRequest) (effects.CheckinResponse, error) {
	t := time.Now()
	resp, err := x.t.Checkin(ctx, token, req)
	x.w.since(t)
	if x.w.OnCheckin != nil {
		x.w.OnCheckin(t, time.Since(t), err)
	}
	return resp, err
}

func (x wTenancy) FetchBundle(ctx context.Context, token, url string, limit int64, dst io.Writer) (effects.Bundle, error) {
	defer x.w.since(time.Now())
	return x.t.FetchBundle(ctx, token, url, limit, dst)
}

func (x wTenancy) Lease(ctx context.Context, token, envID, reason string) (effects.Lease, error) {
	defer x.w.since(time.Now())
	return x.t.Lease(ctx, token, envID, reason)
}

func (x wTenancy) Report(ctx context.Context, token string, r effects.Report) error {
	defer x.w.since(time.Now())
	return x.t.Report(ctx, token, r)
}

type wBao struct {
	b effects.Bao
	w *Waits
}

func (x wBao) Login(ctx context.Context, mount, role, jwt string) (effects.Token, error) {
	defer x.w.since(time.Now())
	return x.b.Login(ctx, mount, role, jwt)
}

func (x wBao) LookupSelf(ctx context.Context, token string) (effects.TokenInfo, error) {
	defer x.w.since(time.Now())
	return x.b.LookupSelf(ctx, token)
}

func (x wBao) RenewSelf(ctx context.Context, token string, inc time.Duration) (time.Duration, error) {
	defer x.w.since(time.Now())
	return x.b.RenewSelf(ctx, token, inc)
}

func (x wBao) RevokeSelf(ctx context.Context, token string) error {
	defer x.w.since(time.Now())
	return x.b.RevokeSelf(ctx, token)
}

func (x wBao) ReadKV(ctx context.Context, token, path, key string, version int) (string, error) {
	defer x.w.since(time.Now())
	return x.b.ReadKV(ctx, token, path, key, version)
}

// wCompose times the docker commands; the model's preparation (no docker command) is not a
// wait and passes through.
type wCompose struct {
	effects.Compose
	w *Waits
}

func (x wCompose) PS(ctx context.Context, dir string) ([]effects.Container, error) {
	defer x.w.since(time.Now())
	return x.Compose.PS(ctx, dir)
}

func (x wCompose) Pull(ctx context.Context, dir string) error {
	defer x.w.since(time.Now())
	return x.Compose.Pull(ctx, dir)
}

func (x wCompose) Up(ctx context.Context, dir string) error {
	defer x.w.since(time.Now())
	return x.Compose.Up(ctx, dir)
}

func (x wCompose) Down(ctx context.Context, dir string, volumes bool) error {
	defer x.w.since(time.Now())
	return x.Compose.Down(ctx, dir, volumes)
}

func (x wCompose) Logs(ctx context.Context, dir string, tail int) (string, error) {
	defer x.w.since(time.Now())
	return x.Compose.Logs(ctx, dir, tail)
}

func (x wCompose) DataRoot(ctx context.Context) (string, error) {
	defer x.w.since(time.Now())
	return x.Compose.DataRoot(ctx)
}

func (x wCompose) ImagePrune(ctx context.Context) error {
	defer x.w.since(time.Now())
	return x.Compose.ImagePrune(ctx)
}

type wDisk struct {
	d effects.Disk
	w *Waits
}

func (x wDisk) Free(path string) (uint64, error) {
	defer x.w.since(time.Now())
	return x.d.Free(path)
}
