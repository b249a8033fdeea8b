package domain

// CallbackTry decides what one try at a job's callback records. code is
// the caller's HTTP status (0 when the post failed, errText saying why);
// attempt is River's attempt of the callback job, of maxAttempts, or 0 for
// the try the process that ended the job makes at once (a failure there is
// handed to River, RequeueCallback, so it is never final). A 2xx is CALLBACK_DELIVERED and
// clears the callback timer; anything else is CALLBACK_FAILED, final (and
// clearing the timer) at the last attempt. ok says whether the caller
// acknowledged it.
func CallbackTry(attempt, maxAttempts, code int, errText string, md Metadata) (ev Event, fx Effects, ok bool) {
	if errText == "" && code/100 == 2 {
		return NewEvent(EventCallbackSent, CallbackOutcome{Attempt: attempt, StatusCode: code}, md), Effects{ClearTimer: true}, true
	}
	co := CallbackOutcome{Attempt: attempt, StatusCode: code, Error: errText, Final: attempt > 0 && attempt >= maxAttempts}
	// The try made at once hands the callback to River's retries.
	return NewEvent(EventCallbackFailed, co, md), Effects{ClearTimer: co.Final, RequeueCallback: attempt == 0}, false
}
