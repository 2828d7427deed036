package main

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// cmdreset.go is the reset command: a support team unblocks a customer.

var resetCommand = &command{
	name:    "reset",
	args:    []string{"RESOURCE", "DOMAIN"},
	summary: "forget DOMAIN's counts of RESOURCE on every agent of the mesh",
	help: `Asks POST /v1/reset: the agent forgets DOMAIN's counts, tier entries and
gcra state of RESOURCE (kind tiers or gcra), and tells every peer, which
forget them too; counts made before the reset never come back, those made
after it are kept. The agent logs who asked. A resource the config does
not define, in a namespace that allows it, holds nothing to reset: exit 0.
A copies, adaptive or pacer resource, or an unknown one, is refused
(exit 1).`,
	run: runReset,
}

func runReset(c *cmdRun, args []string) error {
	body, err := json.Marshal(map[string]string{"resource": args[0], "domain": args[1]})
	if err != nil {
		return err
	}
	ans, err := c.agent.send(c.ctx, http.MethodPost, "/v1/reset", body)
	if err != nil {
		return err
	}
	if ans.status != http.StatusOK {
		return errorOf(http.MethodPost, "/v1/reset", ans)
	}
	var r struct {
		Reset bool `json:"reset"`
	}
	if err := json.Unmarshal(ans.body, &r); err != nil || !r.Reset {
		return &answerError{status: ans.status, code: "bad_reply", message: fmt.Sprintf("POST /v1/reset: not the reply expected: %q", ans.body)}
	}
	if c.json {
		writeJSONLine(c.out, ans.body)
		return nil
	}
	fmt.Fprintf(c.out, "reset %s for %s: its counts are forgotten here and on every peer\n", printable(args[0]), printable(args[1]))
	return nil
}
