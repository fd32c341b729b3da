package vocab

// Flight actions, as tenancy's check-in names them and the record keeps them. Nothing else
// exists.
const (
	ActionApply = "apply"
	ActionNone  = "none"
	ActionDown  = "down"
	// ActionResume is the action of the tick `resume` journals on its own.
	ActionResume = "resume"
	// ActionBootstrap is the action of the tick `bootstrap` journals on its own.
	ActionBootstrap = "bootstrap"
	// ActionHold is a tick of `monky-deployd hold`: a person held or released the box.
	ActionHold = "hold"
)

// Exit codes: a contract with the timer and the loop (docs/OPERATIONS.md, "Exit codes"). The
// agent decides them in one place (states.ExitCode).
const (
	ExitOK          = 0
	ExitFail        = 1
	ExitTemporary   = 75 // the unit's SuccessExitStatus: the next tick resumes
	ExitEnvMismatch = 78
)
