package a2a

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
)

// PushToken is the bearer token an A2A agent must present when it pushes
// updates of attempt of job: an HMAC of both under key (the agent's
// delivery-signing key), so nothing per job need be stored.
func PushToken(key []byte, jobID string, attempt int) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("a2a-push." + jobID + "." + strconv.Itoa(attempt)))
	return "arp_" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// PushTokenValid checks token against PushToken under any of keys, in
// constant time.
func PushTokenValid(keys [][]byte, jobID string, attempt int, token string) bool {
	ok := false
	for _, k := range keys {
		if hmac.Equal([]byte(PushToken(k, jobID, attempt)), []byte(token)) {
			ok = true
		}
	}
	return ok && token != ""
}
