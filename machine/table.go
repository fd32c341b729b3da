package machine

import "github.com/looplab/fsm"

// Events of the machine. A step's outcome names one; the table says where it leads.
const (
	EvCheckin   = "checkin"     // a check-in answered; a new flight starts
	EvSupersede = "supersede"   // the desired sha changed mid-flight; the new one starts over
	EvRetry     = "retry"       // a failed apply is retried after its backoff, or after resume
	EvRecheck   = "recheck"     // a refused bundle is checked again (disk freed, or resume)
	EvVerify    = "verify"      // the bundle is fetched, its sha and shape verified
	EvRefuse    = "refuse"      // a check before the lease refused the bundle
	EvLease     = "lease"       // tenancy granted a lease; its grant waits in a 0600 file
	EvReuse     = "reuse-token" // no lease needed: a working token reads the secrets, or none are read
	EvLogin     = "login"       // OpenBao login with the lease's grant; token stored
	EvStage     = "stage"       // secrets read, .env rendered, release promoted, current swapped
	EvPull      = "pull"        // compose pull
	EvUp        = "up"          // compose up -d --remove-orphans
	EvHealthy   = "healthy"     // every service running and healthy
	EvFail      = "fail"        // a failure of this apply (or an unhealthy heartbeat)
	EvRevert    = "revert"      // the apply failed; its bundle consents: bring back the release last healthy
	EvReverted  = "reverted"    // the release last healthy serves again; the failed sha is remembered
	EvDown      = "down"        // compose down for a retire
	EvReport    = "report"      // tenancy acknowledged the report
	EvBlock     = "block"       // only a person or a new grant can clear this
	EvUnblock   = "unblock"     // resume, a changed config or a new grant cleared the block
	EvResume    = "resume"      // `resume` cleared a park
)

func names(states ...State) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

var inFlight = []State{CheckedIn, BundleVerified, Leased, LoggedIn, Staged, Pulled, Up, Healthy, Reverting, Down}

// Table is the transition table: the single definition the fsm, the docs diagram and the
// tests are built from.
var Table = fsm.Events{
	{Name: EvCheckin, Src: names(Idle, Reported, Refused, Failed), Dst: string(CheckedIn)},
	{Name: EvSupersede, Src: names(inFlight...), Dst: string(CheckedIn)},
	{Name: EvRetry, Src: names(Failed), Dst: string(CheckedIn)},
	{Name: EvRecheck, Src: names(Refused), Dst: string(CheckedIn)},
	{Name: EvVerify, Src: names(CheckedIn), Dst: string(BundleVerified)},
	{Name: EvRefuse, Src: names(CheckedIn, BundleVerified), Dst: string(Refused)},
	{Name: EvLease, Src: names(BundleVerified), Dst: string(Leased)},
	{Name: EvReuse, Src: names(BundleVerified), Dst: string(LoggedIn)},
	{Name: EvLogin, Src: names(Leased), Dst: string(LoggedIn)},
	{Name: EvStage, Src: names(LoggedIn), Dst: string(Staged)},
	{Name: EvPull, Src: names(Staged), Dst: string(Pulled)},
	{Name: EvUp, Src: names(Pulled), Dst: string(Up)},
	{Name: EvHealthy, Src: names(CheckedIn, Up), Dst: string(Healthy)},
	{Name: EvFail, Src: names(CheckedIn, BundleVerified, Leased, LoggedIn, Staged, Pulled, Up, Reverting), Dst: string(Failed)},
	{Name: EvRevert, Src: names(Pulled, Up), Dst: string(Reverting)},
	{Name: EvReverted, Src: names(Reverting), Dst: string(Failed)},
	{Name: EvDown, Src: names(CheckedIn), Dst: string(Down)},
	{Name: EvReport, Src: names(Healthy, Failed, Down), Dst: string(Reported)},
	{Name: EvBlock, Src: names(Idle, CheckedIn, BundleVerified, Refused, Leased, LoggedIn, Staged, Pulled, Up, Healthy, Failed, Reverting, Down, Reported), Dst: string(Blocked)},
	{Name: EvUnblock, Src: names(Blocked), Dst: string(Idle)},
	{Name: EvResume, Src: names(Refused, Failed), Dst: string(Idle)},
}

// newFSM returns an fsm over Table starting at s. It has no callbacks: no I/O happens in it.
func newFSM(s State) *fsm.FSM {
	return fsm.NewFSM(string(s), Table, fsm.Callbacks{})
}
