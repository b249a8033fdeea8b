package client_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agentreach/agentreach/sdk/client"
)

// A caller runs a job: submitted, and answered once it has ended (in one
// round trip when it ends within 20 s).
func ExampleClient_Run() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("AGENTREACH_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	job, err := c.Run(context.Background(), client.SubmitRequest{Capability: "document:parse:ocr", Payload: map[string]string{"url": "x.pdf"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, string(job.Result))
}

// A caller submits a job, waits for it, and reads its result.
func ExampleClient_Submit() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("AGENTREACH_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	sub, err := c.Submit(ctx, client.SubmitRequest{Capability: "document:parse:ocr", Payload: map[string]string{"url": "x.pdf"},
		IdempotencyKey: "order-42"})
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.Wait(ctx, sub.JobID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, string(job.Result))
}

// A caller in lookup mode calls agents itself: the cache, the watch feed
// and the cache file keep it going without a round trip to Agent-Reach per
// call, and without Agent-Reach for a while.
func ExampleClient_Invoke() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("AGENTREACH_KEY"),
		client.CacheFile(filepath.Join(os.TempDir(), "agentreach-candidates.json")),
		client.WatchAgents(), client.CandidateTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // sends the reports still pending
	res, err := c.Invoke(context.Background(), "document:parse:ocr", map[string]string{"url": "x.pdf"},
		client.InvokeOptions{Hint: "a scanned pdf"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.AgentID, res.Status, string(res.Result), res.Stale)
}

// A callback handler checks the signature before it trusts the body.
func ExampleVerifyCallback() {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	body := []byte(`{"job_id":"j1","status":"SUCCESS"}`)
	now := time.Unix(1_800_000_000, 0)

	// What Agent-Reach sends:
	mac := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
	mac.Write([]byte("msg_j1.1800000000." + string(body)))
	h := http.Header{}
	h.Set("webhook-id", "msg_j1")
	h.Set("webhook-timestamp", "1800000000")
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))

	fmt.Println(client.VerifyCallback(secret, h, body, now))
	fmt.Println(client.VerifyCallback(secret, h, body, now.Add(time.Hour)) != nil)
	// Output:
	// <nil>
	// true
}
