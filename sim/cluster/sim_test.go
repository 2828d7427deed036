package cluster

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

func resource(t testing.TB, js string) *config.Resource {
	t.Helper()
	rc, err := config.ParseResource([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

const (
	gcraJS  = `{"kind":"gcra","burst":1000,"count":1000,"period":"1s","drift":0.05}`
	tiersJS = `{"kind":"tiers","tiers":"1000,1,1,0","drift":0.05}`
)

func run(t *testing.T, s Scenario) Result {
	t.Helper()
	r, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDeterministicPerSeed(t *testing.T) {
	s := Scenario{Resource: resource(t, gcraJS), Nodes: 5, Seed: 7, Jitter: 2 * time.Millisecond,
		Loss: 0.05, Duration: 3 * time.Second, Arrivals: ArrivalsPoisson, Keys: 50, KeySpread: KeysZipf}
	a, b := run(t, s), run(t, s)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
	s.Seed = 8
	if c := run(t, s); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same result")
	}
}

// One node is the engine alone: the same grants as a local engine fed the
// same instants, no false denial, and no gossip.
func TestOneNodeIsLocal(t *testing.T) {
	for _, js := range []string{gcraJS, tiersJS} {
		rc := resource(t, js)
		s := Scenario{Resource: rc, Nodes: 1, Rate: 3000, Duration: 3 * time.Second}
		r := run(t, s)
		e := local.New(&config.Config{Resources: map[string]*config.Resource{"x": rc}})
		want := 0
		for k := 0; ; k++ {
			at := int64(float64(k) / 3000 * 1e9)
			if at >= int64(s.Duration) {
				break
			}
			d, err := e.Request(base.Add(time.Duration(at)), "x", "k0", 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			want += d.Granted
		}
		if r.Grants != want || r.Requests != 9000 {
			t.Errorf("%s: %d of %d granted, the engine alone grants %d of 9000", rc.Kind, r.Grants, r.Requests, want)
		}
		if r.FalseDenials != 0 || r.Bytes != 0 || r.WorstWindowRatio > 1 {
			t.Errorf("%s: alone: false denials %d, bytes %d, worst window %.3f", rc.Kind, r.FalseDenials, r.Bytes, r.WorstWindowRatio)
		}
	}
}

// Two nodes, no network delay and drift 0 (every hit shipped at once):
// each decides knowing every earlier grant, as one node would.
func TestTwoNodesNoDelayDriftZero(t *testing.T) {
	zero := 0.0
	// No flush gap: every hit is shipped the instant it is made.
	r := run(t, Scenario{Resource: resource(t, tiersJS), Nodes: 2, Delay: NoDelay, Drift: &zero, FlushGap: -1, Seed: 1})
	if r.WorstWindowRatio > 1 || r.FalseDenials != 0 {
		t.Errorf("worst window %.4f × L, false denials %d; want ≤ 1 and 0", r.WorstWindowRatio, r.FalseDenials)
	}
	if r.ConvergenceP99 != 0 {
		t.Errorf("convergence p99 %s, want 0 (every hit shipped at once, no delay)", r.ConvergenceP99)
	}
}

// Tick-only shipping over-admits more than drift shipping; the oracle sees
// it.
func TestTickOnlyOvershootsMore(t *testing.T) {
	s := Scenario{Resource: resource(t, tiersJS), Nodes: 10, Seed: 3}
	drift := run(t, s)
	s.TickOnly = true
	tick := run(t, s)
	if !(tick.WorstWindowRatio > drift.WorstWindowRatio+0.1) || tick.Flushes != 0 || drift.Flushes == 0 {
		t.Errorf("tick-only worst %.3f (flushes %d), drift %.3f (flushes %d)", tick.WorstWindowRatio, tick.Flushes, drift.WorstWindowRatio, drift.Flushes)
	}
	if drift.BytesPerNodeS <= tick.BytesPerNodeS {
		t.Errorf("drift ships %.0f B/s per node, tick-only %.0f: drift should cost more", drift.BytesPerNodeS, tick.BytesPerNodeS)
	}
}

// Sparse keys limited low (threshold one hit) make every hit a drift
// flush; the flush gap coalesces them, at most one flush per gap per node,
// for fewer datagrams and bytes and the same oracle figures within a hair.
func TestFlushGapCoalesces(t *testing.T) {
	s := Scenario{Resource: resource(t, `{"kind":"gcra","burst":10,"count":10,"period":"1s","drift":0.05}`),
		Nodes: 5, Keys: 1000, Rate: 2000, Duration: 2 * time.Second, Seed: 4, FlushGap: -1}
	none := run(t, s)
	s.FlushGap = 0 // reconcile's default, 2 ms
	gap := run(t, s)
	if most := int64(5 * 2 * time.Second / (2 * time.Millisecond)); gap.Flushes > most {
		t.Errorf("%d flushes with a 2 ms gap over 5 nodes × 2 s: want at most %d", gap.Flushes, most)
	}
	if !(gap.Flushes*2 < none.Flushes) || !(gap.BytesPerNodeS < none.BytesPerNodeS) {
		t.Errorf("gap: %d flushes, %.0f B/s per node; none: %d flushes, %.0f B/s: want far fewer flushes and fewer bytes",
			gap.Flushes, gap.BytesPerNodeS, none.Flushes, none.BytesPerNodeS)
	}
	if gap.FalseDenials != 0 || gap.WorstWindowRatio > none.WorstWindowRatio+0.05 {
		t.Errorf("gap: worst window %.3f × L, false denials %d; none: %.3f", gap.WorstWindowRatio, gap.FalseDenials, none.WorstWindowRatio)
	}
}

func TestLossSlowsConvergence(t *testing.T) {
	s := Scenario{Resource: resource(t, gcraJS), Nodes: 5, Seed: 2, Keys: 1000, Rate: 200}
	clean := run(t, s)
	s.Loss = 0.3
	lossy := run(t, s)
	if lossy.Lost == 0 || clean.Lost != 0 {
		t.Fatalf("lost %d with loss 0.3, %d without", lossy.Lost, clean.Lost)
	}
	if lossy.ConvergenceP99 <= clean.ConvergenceP99 {
		t.Errorf("convergence p99 %s with 30%% loss, %s without: loss should slow it", lossy.ConvergenceP99, clean.ConvergenceP99)
	}
	// Numbered streams ask for what was lost: the origins send it again.
	if lossy.Asked == 0 || lossy.Resent == 0 || clean.Asked != 0 {
		t.Errorf("asked %d, resent %d with 30%% loss; asked %d without", lossy.Asked, lossy.Resent, clean.Asked)
	}
	// Unsequenced, only the resend schedule repairs: fewer deliveries.
	s.Unsequenced = true
	old := run(t, s)
	s.Loss = 0
	oldClean := run(t, s)
	if float64(old.Delivered) > 0.8*float64(oldClean.Delivered) || old.Asked != 0 {
		t.Errorf("unsequenced: delivered %d with 30%% loss (asked %d), %d without", old.Delivered, old.Asked, oldClean.Delivered)
	}
	// Even at this loss, asking costs far less than resending everything.
	if !(lossy.BytesPerHitPerPeer < 0.5*old.BytesPerHitPerPeer) {
		t.Errorf("bytes per hit per peer at 30%% loss: %.1f with repair, %.1f with resends", lossy.BytesPerHitPerPeer, old.BytesPerHitPerPeer)
	}
}

// TestShipOnceCostsLess: numbered streams ship a change once, so sparse
// keys cost far fewer bytes per hit than the resend schedule, with the
// same accuracy, and nothing is asked for on a lossless network.
func TestShipOnceCostsLess(t *testing.T) {
	s := Scenario{Resource: resource(t, gcraJS), Nodes: 5, Seed: 3, Keys: 1000, Rate: 400, Encrypt: true}
	once := run(t, s)
	s.Unsequenced = true
	old := run(t, s)
	if !(once.BytesPerHitPerPeer < 0.6*old.BytesPerHitPerPeer) {
		t.Errorf("bytes per hit per peer: %.1f once, %.1f resent: want under 0.6×", once.BytesPerHitPerPeer, old.BytesPerHitPerPeer)
	}
	// Nothing is asked for on a lossless network, names included: a node
	// leaves out a name a peer shipped (it went to everyone), and resolves
	// from its own memory a name it shipped itself.
	if once.Asked != 0 || once.Resyncs != 0 || once.Duplicates != 0 || once.NamesAsked != 0 {
		t.Errorf("a lossless run asked %d seqs and %d names, resynced %d, heard %d twice", once.Asked, once.NamesAsked, once.Resyncs, once.Duplicates)
	}
	if once.FalseDenials != old.FalseDenials || once.WorstWindowRatio > old.WorstWindowRatio+0.02 || float64(once.Unconverged) > 1.1*float64(old.Unconverged) {
		t.Errorf("once: worst %.3f, false denials %d, unconverged %d; resent: worst %.3f, false denials %d, unconverged %d",
			once.WorstWindowRatio, once.FalseDenials, once.Unconverged, old.WorstWindowRatio, old.FalseDenials, old.Unconverged)
	}
}

func TestPartitionOverAdmits(t *testing.T) {
	s := Scenario{Resource: resource(t, tiersJS), Nodes: 4, Seed: 4, Duration: 6 * time.Second}
	whole := run(t, s)
	s.Partitions = []Partition{{Start: 2 * time.Second, End: 4 * time.Second, Nodes: []int{0, 1}}}
	split := run(t, s)
	if split.Cut == 0 {
		t.Fatal("nothing was cut by the partition")
	}
	// Each side grants the whole limit: about twice L per window.
	if split.WorstWindowRatio < 1.5 || whole.WorstWindowRatio > 1.1 {
		t.Errorf("worst window %.3f split, %.3f whole", split.WorstWindowRatio, whole.WorstWindowRatio)
	}
	if split.ConvergenceMax <= whole.ConvergenceMax {
		t.Errorf("convergence max %s split, %s whole", split.ConvergenceMax, whole.ConvergenceMax)
	}
}

func TestDeath(t *testing.T) {
	s := Scenario{Resource: resource(t, gcraJS), Nodes: 4, Seed: 5, Duration: 6 * time.Second,
		Keys: 100, Rate: 300, DetectAfter: time.Second}
	alive := run(t, s)
	s.Deaths = []Death{{Node: 3, At: 2 * time.Second}}
	dead := run(t, s)
	if dead.Cut == 0 || alive.Cut != 0 {
		t.Errorf("datagrams to the dead node before detection: %d (none dead: %d)", dead.Cut, alive.Cut)
	}
	if dead.Requests >= alive.Requests {
		t.Errorf("requests %d with a death, %d without", dead.Requests, alive.Requests)
	}
	if dead.Nodes[3].BytesPerS >= alive.Nodes[3].BytesPerS/2 {
		t.Errorf("the dead node sent %.0f B/s, alive %.0f", dead.Nodes[3].BytesPerS, alive.Nodes[3].BytesPerS)
	}
	if dead.Unconverged > alive.Unconverged+1 {
		t.Errorf("%d samples never converged after a death (%d without)", dead.Unconverged, alive.Unconverged)
	}
}

func TestValidate(t *testing.T) {
	rc := resource(t, gcraJS)
	neg := -0.1
	cases := []struct {
		name string
		s    Scenario
		want string
	}{
		{"no resource", Scenario{Nodes: 1}, "resource: required"},
		{"nodes 0", Scenario{Resource: rc}, "nodes: must be 1 to 5000, got 0"},
		{"loss 1", Scenario{Resource: rc, Nodes: 2, Loss: 1}, "loss: must be in [0, 1), got 1"},
		{"loss neg", Scenario{Resource: rc, Nodes: 2, Loss: -0.5}, "loss: must be in [0, 1)"},
		{"drift", Scenario{Resource: rc, Nodes: 2, Drift: &neg}, "drift: must be in [0, 1], got -0.1"},
		{"skew", Scenario{Resource: rc, Nodes: 2, Skew: "lopsided"}, `skew: must be "even", "hot" or "zipf", got "lopsided"`},
		{"warmup", Scenario{Resource: rc, Nodes: 2, Duration: time.Second, Warmup: time.Second}, "warmup: must be less than the duration 1s"},
		{"partition node", Scenario{Resource: rc, Nodes: 2, Partitions: []Partition{{End: time.Second, Nodes: []int{2}}}}, "partitions[0].nodes: node 2 is not in 0 to 1"},
		{"partition span", Scenario{Resource: rc, Nodes: 2, Partitions: []Partition{{Start: time.Second, End: time.Second, Nodes: []int{0}}}}, "partitions[0]: needs 0 ≤ start < end"},
		{"death twice", Scenario{Resource: rc, Nodes: 2, Deaths: []Death{{Node: 1}, {Node: 1}}}, "deaths[1].node: node 1 dies twice"},
		{"copies", Scenario{Resource: resource(t, `{"kind":"copies","domain_limit":3}`), Nodes: 2}, `resource.kind: must be gcra or tiers, got "copies"`},
		{"two tiers", Scenario{Resource: resource(t, `{"kind":"tiers","tiers":"10,1,1,0,20,1,1,0"}`), Nodes: 2}, "resource.tiers: the oracle takes exactly one tier, got 2"},
		{"rate", Scenario{Resource: rc, Nodes: 2, Rate: -1}, "rate: must be a finite number ≥ 0, got -1"},
		{"not normalized", Scenario{Resource: &config.Resource{Kind: config.KindGCRA, Burst: 2, Count: 10, Period: time.Second}, Nodes: 2},
			"resource: not normalized (drift or max_keys absent)"},
	}
	for _, c := range cases {
		err := c.s.Validate()
		if err == nil || !errors.Is(err, ErrScenario) || !contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an ErrScenario containing %q", c.name, err, c.want)
		}
		if _, rerr := Run(context.Background(), c.s); rerr == nil {
			t.Errorf("%s: Run accepted it", c.name)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestWorkBudget(t *testing.T) {
	s := Scenario{Resource: resource(t, gcraJS), Nodes: 100, Rate: 10000, MaxEvents: 1000}
	start := time.Now()
	_, err := Run(context.Background(), s)
	if !errors.Is(err, ErrTooMuchWork) {
		t.Fatalf("got %v, want ErrTooMuchWork", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("refused after %s: the estimate should refuse before running", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Scenario{Resource: resource(t, gcraJS), Nodes: 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v", err)
	}
}

// Probes (bench/cluster's) add a fresh key every ProbeEvery: more bytes,
// no change to the load's requests.
func TestProbes(t *testing.T) {
	s := Scenario{Resource: resource(t, gcraJS), Nodes: 3, Seed: 1, Duration: 3 * time.Second}
	plain := run(t, s)
	s.ProbeEvery = 100 * time.Millisecond
	probed := run(t, s)
	if probed.Requests != plain.Requests || probed.PayloadBytes <= plain.PayloadBytes {
		t.Errorf("with probes: %d requests, %d bytes; without: %d, %d", probed.Requests, probed.PayloadBytes, plain.Requests, plain.PayloadBytes)
	}
}

// TestScenarioOwners: Scenario.Owners names the nodes the run places each
// key on before any death.
func TestScenarioOwners(t *testing.T) {
	s := Scenario{Resource: resource(t, `{"kind":"gcra","burst":10,"count":10,"period":"1s"}`), Nodes: 50, Keys: 200, NamePrefix: "n", KeyPrefix: "d"}
	sm, err := setup(s)
	if err != nil {
		t.Fatal(err)
	}
	for k := range s.Keys {
		o, sc := s.Owners(k)
		wo, ws := sm.ring.Owners(reconcile.KeyHash(sm.resName, sm.domains[k]))
		if o < 0 || sc < 0 || sm.nodes[o].name != wo || sm.nodes[sc].name != ws {
			t.Fatalf("key %d: Owners = %d, %d; the run places it on %s, %s", k, o, sc, wo, ws)
		}
	}
}

// TestOwnerDeath: one hot key whose owner dies. Before the mesh declares
// it gone the successor relays the key (the owner fell silent), so the
// cluster stays near the limit instead of admitting what each node is
// offered; after, the successor owns the key, and no count is applied
// twice (a relay of buckets past their lifetime once denied for good).
func TestOwnerDeath(t *testing.T) {
	rc := resource(t, `{"kind":"gcra","burst":1250,"count":1250,"period":"1s","drift":0.05}`)
	for _, tc := range []struct {
		name   string
		detect time.Duration
		worst  float64
	}{
		{"before detection", 20 * time.Second, 1.25},
		{"through detection", 2 * time.Second, 1.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Scenario{Resource: rc, Nodes: 20, Keys: 1, Rate: 250, OwnerFrom: 2, Duration: 10 * time.Second,
				Warmup: time.Second, DetectAfter: tc.detect, Encrypt: true, Label: "obol", Seed: 1}
			o, _ := s.Owners(0)
			s.Deaths = []Death{{Node: o, At: 2 * time.Second}}
			r := run(t, s)
			if r.FalseDenials != 0 || r.WorstWindowRatio > tc.worst || r.MeanWindowRatio > 1.02 {
				t.Errorf("owner killed: %d false denials, worst window %.3f × L, mean %.3f; want 0, ≤ %.2f, ≤ 1.02",
					r.FalseDenials, r.WorstWindowRatio, r.MeanWindowRatio, tc.worst)
			}
			t.Logf("worst %.3f mean %.3f", r.WorstWindowRatio, r.MeanWindowRatio)
		})
	}
}

// TestTargetedShipOnce: in owner mode, messages to one node numbered per
// receiver ship once: fewer bytes than resending them on the schedule,
// the same accuracy; with loss, the receivers ask for what they missed and
// the senders send it again from what they keep.
func TestTargetedShipOnce(t *testing.T) {
	rc := resource(t, `{"kind":"gcra","burst":50,"count":50,"period":"1s","drift":0.05}`)
	for _, loss := range []float64{0, 0.05} {
		s := Scenario{Resource: rc, Nodes: 20, Keys: 50, Rate: 200, OwnerFrom: 2, Duration: 4 * time.Second, Loss: loss, Seed: 3}
		once := run(t, s)
		s.TargetedResends = true
		resend := run(t, s)
		t.Logf("loss %.2f: once %.0f B/node/s worst %.3f mean %.3f false %d asked %d resent %d reships %d; resends %.0f B/node/s worst %.3f mean %.3f false %d",
			loss, once.BytesPerNodeS, once.WorstWindowRatio, once.MeanWindowRatio, once.FalseDenials, once.Asked, once.Resent, once.Reships,
			resend.BytesPerNodeS, resend.WorstWindowRatio, resend.MeanWindowRatio, resend.FalseDenials)
		if once.BytesPerNodeS >= 0.8*resend.BytesPerNodeS {
			t.Errorf("loss %.2f: %.0f bytes per node per second shipping once, %.0f resending: want far fewer", loss, once.BytesPerNodeS, resend.BytesPerNodeS)
		}
		if once.WorstWindowRatio > resend.WorstWindowRatio+0.05 || once.MeanWindowRatio > resend.MeanWindowRatio+0.01 || once.FalseDenials > 2*resend.FalseDenials+10 {
			t.Errorf("loss %.2f: once: worst %.3f mean %.3f × L, %d false denials; resends: worst %.3f mean %.3f, %d", loss,
				once.WorstWindowRatio, once.MeanWindowRatio, once.FalseDenials, resend.WorstWindowRatio, resend.MeanWindowRatio, resend.FalseDenials)
		}
		if (loss == 0) != (once.Asked == 0 && once.Resent == 0) {
			t.Errorf("loss %.2f: %d seqs asked for, %d resent", loss, once.Asked, once.Resent)
		}
	}
}

// TestStretchedHeartbeat: at 250 nodes (stream.Stretch 3) an idle node's
// heartbeat goes to each peer every twelfth tick instead of every fourth,
// so a lightly loaded cluster sends far fewer datagrams to every peer,
// with the same decisions.
func TestStretchedHeartbeat(t *testing.T) {
	rc := resource(t, `{"kind":"gcra","burst":20,"count":20,"period":"1s","drift":0.05}`)
	s := Scenario{Resource: rc, Nodes: 250, Keys: 100, Rate: 1, Duration: 4 * time.Second, Warmup: time.Second, Seed: 5}
	stretched := run(t, s)
	s.FlatHeartbeat = true
	flat := run(t, s)
	others := func(r Result) float64 { return r.DatagramsPerNodeS - float64(r.Targeted)/r.Measured.Seconds()/250 }
	t.Logf("to every peer per node per second: stretched %.1f, flat %.1f; bytes %.0f and %.0f", others(stretched), others(flat), stretched.BytesPerNodeS, flat.BytesPerNodeS)
	if others(stretched) > 0.45*others(flat) || others(flat) < 200 {
		t.Errorf("datagrams to every peer per node per second: stretched %.1f, flat %.1f; want about a third", others(stretched), others(flat))
	}
	if stretched.Grants != flat.Grants || stretched.FalseDenials != flat.FalseDenials || stretched.WorstWindowRatio != flat.WorstWindowRatio {
		t.Errorf("decisions differ: stretched %d grants, %d false denials, worst %.3f; flat %d, %d, %.3f",
			stretched.Grants, stretched.FalseDenials, stretched.WorstWindowRatio, flat.Grants, flat.FalseDenials, flat.WorstWindowRatio)
	}
}

// A rate so small that the next request's instant is past any int64 of
// nanoseconds: no further request is sent, and nothing is queued at a wrapped
// (negative) time that would burn the event budget.
func TestTinyRateSendsNothing(t *testing.T) {
	for _, arrivals := range []string{ArrivalsEven, ArrivalsPoisson} {
		for _, rate := range []float64{1e-10, 5e-324, 1e-300} {
			s := Scenario{Resource: resource(t, gcraJS), Nodes: 3, Rate: rate, Arrivals: arrivals,
				Duration: 2 * time.Second, MaxEvents: 10_000}
			r, err := Run(context.Background(), s)
			if err != nil {
				t.Fatalf("%s at %g/s: %v", arrivals, rate, err)
			}
			// At most the one request a node's phase may put at the start.
			if r.Requests > s.Nodes || r.Events > 1_000 {
				t.Errorf("%s at %g/s: %d requests and %d events, want at most %d requests and a few ticks",
					arrivals, rate, r.Requests, r.Events, s.Nodes)
			}
		}
	}
}
