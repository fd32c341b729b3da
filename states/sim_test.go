package states_test

import "github.com/tikali/monky-deployd/test/sim"

func simFail(path string, status int, code, retryAfter string) sim.FailRule {
	return sim.FailRule{Path: path, Status: status, Code: code, RetryAfter: retryAfter}
}

func simFailTimes(path string, status, times int) sim.FailRule {
	return sim.FailRule{Path: path, Status: status, Times: times}
}
