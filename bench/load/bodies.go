package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
)

// bodies.go builds the request bodies before a phase starts, so that sending
// one costs the generator a random index and nothing else.

// encoding is how bodies and replies are encoded.
type encoding int

const (
	encJSON encoding = iota
	encMsgpack
)

func (e encoding) String() string {
	if e == encMsgpack {
		return "msgpack"
	}
	return "json"
}

// contentType is the Content-Type (and Accept) of the encoding.
func (e encoding) contentType() string {
	if e == encMsgpack {
		return "application/msgpack"
	}
	return "application/json"
}

// parseEncoding reads the -enc flag.
func parseEncoding(s string) (encoding, error) {
	switch s {
	case "json":
		return encJSON, nil
	case "msgpack":
		return encMsgpack, nil
	}
	return 0, fmt.Errorf("-enc %q: want json or msgpack", s)
}

// wireRequest is one rate request, as /v1/request takes it and as an item of
// /v1/batch (docs/api.md): the same field names in JSON and MessagePack.
type wireRequest struct {
	Resource  string `json:"resource" msgpack:"resource"`
	Domain    string `json:"domain" msgpack:"domain"`
	Copies    int    `json:"copies" msgpack:"copies"`
	MinCopies int    `json:"min_copies" msgpack:"min_copies"`
}

// wireBatch is the body of /v1/batch.
type wireBatch struct {
	Requests []wireRequest `json:"requests" msgpack:"requests"`
}

// wireError is the error object of a reply or of a batch item.
type wireError struct {
	Code    string `json:"code" msgpack:"code"`
	Message string `json:"message" msgpack:"message"`
}

// wireReply is the part of a decision (or a batch item) the generator checks.
type wireReply struct {
	Granted *int64     `json:"granted" msgpack:"granted"`
	Error   *wireError `json:"error" msgpack:"error"`
}

// wireBatchReply is the reply of /v1/batch.
type wireBatchReply struct {
	Responses []wireReply `json:"responses" msgpack:"responses"`
}

// marshal encodes v in e.
func (e encoding) marshal(v any) ([]byte, error) {
	if e == encMsgpack {
		return msgpack.Marshal(v)
	}
	return json.Marshal(v)
}

// unmarshal decodes b, encoded in e, into v.
func (e encoding) unmarshal(b []byte, v any) error {
	if e == encMsgpack {
		return msgpack.Unmarshal(b, v)
	}
	return json.Unmarshal(b, v)
}

// domainName is the name of load domain i.
func domainName(i int) string { return "user-" + strconv.Itoa(i) }

// keyName is the name of the i-th domain driven into the RSS resource.
func keyName(i int) string { return "key-" + strconv.Itoa(i) }

// requestFor is the request for load domain i: the domains are spread over
// the resources in turn, so that each domain always hits the same resource.
func requestFor(resources []string, i int) wireRequest {
	return wireRequest{Resource: resources[i%len(resources)], Domain: domainName(i), Copies: 1, MinCopies: 1}
}

// batchBodyCount is how many distinct /v1/batch bodies are built: each holds
// batch items drawn at random, and a request picks one of them at random.
const batchBodyCount = 1024

// scenario is one kind of load: which endpoint, encoding and, for
// /v1/batch, how many items per request.
type scenario struct {
	enc   encoding
	batch int // items per /v1/batch request; 0 means /v1/request
}

// path is the endpoint of the scenario.
func (s scenario) path() string {
	if s.batch > 0 {
		return "/v1/batch"
	}
	return "/v1/request"
}

// decisions is how many decisions one request of the scenario asks for.
func (s scenario) decisions() int { return max(1, s.batch) }

func (s scenario) String() string {
	if s.batch > 0 {
		return fmt.Sprintf("/v1/batch×%d %s", s.batch, s.enc)
	}
	return "/v1/request " + s.enc.String()
}

// buildBodies returns the precomputed bodies of a scenario over the given
// number of domains: for /v1/request one body per domain (domain i is
// domainName(i), on resources[i % len]); for /v1/batch, batchBodyCount bodies
// of s.batch items, each item's domain drawn uniformly from the same set. A
// request then picks one body uniformly at random, so every domain is equally
// likely. seed makes the batches reproducible.
func buildBodies(s scenario, resources []string, domains int, seed uint64) ([][]byte, error) {
	if len(resources) == 0 {
		return nil, fmt.Errorf("no resources to load")
	}
	if domains < 1 {
		return nil, fmt.Errorf("-domains %d: want at least 1", domains)
	}
	if s.batch <= 0 {
		out := make([][]byte, domains)
		for i := range out {
			b, err := s.enc.marshal(requestFor(resources, i))
			if err != nil {
				return nil, err
			}
			out[i] = b
		}
		return out, nil
	}
	rng := rand.New(rand.NewPCG(seed, uint64(s.batch)))
	out := make([][]byte, batchBodyCount)
	items := make([]wireRequest, s.batch)
	for i := range out {
		for j := range items {
			items[j] = requestFor(resources, rng.IntN(domains))
		}
		b, err := s.enc.marshal(wireBatch{Requests: items})
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// keysBody returns the /v1/batch body (or, when n is 0, the /v1/request
// body) that asks for one token for the RSS domains from .. from+n-1 of
// resource (or just from).
func keysBody(enc encoding, resource string, from, n int) ([]byte, error) {
	if n == 0 {
		return enc.marshal(wireRequest{Resource: resource, Domain: keyName(from), Copies: 1, MinCopies: 1})
	}
	items := make([]wireRequest, n)
	for j := range items {
		items[j] = wireRequest{Resource: resource, Domain: keyName(from + j), Copies: 1, MinCopies: 1}
	}
	return enc.marshal(wireBatch{Requests: items})
}

// checkReply decodes a 200 reply of scenario s and returns how many decisions
// it holds, how many were granted, and an error when it is not a well-formed
// reply (a batch of the wrong length, an item that is an error, a decision
// without granted).
func checkReply(s scenario, body []byte) (decisions, granted int, err error) {
	if s.batch <= 0 {
		var r wireReply
		if err := s.enc.unmarshal(body, &r); err != nil {
			return 0, 0, fmt.Errorf("reply is not %s: %v", s.enc, err)
		}
		if err := r.check(); err != nil {
			return 0, 0, err
		}
		return 1, grantedCount(r), nil
	}
	var r wireBatchReply
	if err := s.enc.unmarshal(body, &r); err != nil {
		return 0, 0, fmt.Errorf("batch reply is not %s: %v", s.enc, err)
	}
	if len(r.Responses) != s.batch {
		return 0, 0, fmt.Errorf("batch reply has %d responses, want %d", len(r.Responses), s.batch)
	}
	for i := range r.Responses {
		if err := r.Responses[i].check(); err != nil {
			return 0, 0, fmt.Errorf("batch item %d: %w", i, err)
		}
		granted += grantedCount(r.Responses[i])
	}
	return s.batch, granted, nil
}

func (r *wireReply) check() error {
	if r.Error != nil {
		return fmt.Errorf("error %s: %s", r.Error.Code, r.Error.Message)
	}
	if r.Granted == nil {
		return fmt.Errorf("decision without granted")
	}
	return nil
}

func grantedCount(r wireReply) int {
	if r.Granted != nil && *r.Granted > 0 {
		return 1
	}
	return 0
}
