package replies

// NoLimit is the value of a Decision's HardLimit or GlobalLimit when there
// is none: the reply leaves the field out.
const NoLimit = -1

// Decision is a rate decision as its reply carries it: the reply of POST
// /v1/request, of GET /v1/check's rejections, and each decision of a batch
// or a simulation. AppendDecision writes it; a reader sets the field a
// name designates (Field) and finds absent what the reply left out.
type Decision struct {
	Granted      int64
	Remaining    int64
	RetryAfterMs int64 // -1: no wait would do
	ResetAfterMs int64
	// Tiers says the decision is about a tiers resource: the tier fields,
	// from Tier to LimitedByGlobal, are written. A reader leaves it false.
	Tiers                bool
	Tier                 int64
	TierLimit            int64
	TierHits             int64
	Burst                bool
	HardLimit            int64 // NoLimit: none, left out
	GlobalLimit          int64 // NoLimit: none, left out
	DomainHitsLastSecond int64
	GlobalHitsLastSecond int64
	LimitedByHard        bool
	LimitedByGlobal      bool
	Shadow               bool
	Lenient              bool // written only when true
	// Ticket is a settle ticket (a request with "settle": true that was
	// granted), written only when not empty.
	Ticket string
}

// The keys of a decision reply's fields.
const (
	kGranted              Key = `,"granted":`
	kRemaining            Key = KeyRemaining
	kRetryAfterMs         Key = `,"retry_after_ms":`
	kResetAfterMs         Key = `,"reset_after_ms":`
	kTier                 Key = `,"tier":`
	kTierLimit            Key = `,"tier_limit":`
	kTierHits             Key = `,"tier_hits":`
	kBurst                Key = `,"burst":`
	kHardLimit            Key = `,"hard_limit":`
	kGlobalLimit          Key = `,"global_limit":`
	kDomainHitsLastSecond Key = `,"domain_hits_last_second":`
	kGlobalHitsLastSecond Key = `,"global_hits_last_second":`
	kLimitedByHard        Key = `,"limited_by_hard":`
	kLimitedByGlobal      Key = `,"limited_by_global":`
	kShadow               Key = `,"shadow":`
	kLenient              Key = `,"lenient":`
	kTicket               Key = `,"` + nTicket + `":`
)

// nTicket is the name of a decision's settle ticket.
const nTicket = "ticket"

// AppendDecision appends the reply of decision d: granted, remaining,
// retry_after_ms and reset_after_ms; for a tiers decision the tier fields
// (hard_limit and global_limit only when there is one); shadow; lenient,
// only when true; ticket, only when there is one.
func AppendDecision(w Writer, b []byte, d *Decision) []byte {
	n := 5
	if d.Tiers {
		n += 8
		if d.HardLimit != NoLimit {
			n++
		}
		if d.GlobalLimit != NoLimit {
			n++
		}
	}
	if d.Lenient {
		n++
	}
	if d.Ticket != "" {
		n++
	}
	b = w.Object(b, n)
	b = w.Int(w.First(b, kGranted), d.Granted)
	b = w.Int(w.Key(b, kRemaining), d.Remaining)
	b = w.Int(w.Key(b, kRetryAfterMs), d.RetryAfterMs)
	b = w.Int(w.Key(b, kResetAfterMs), d.ResetAfterMs)
	if d.Tiers {
		b = w.Int(w.Key(b, kTier), d.Tier)
		b = w.Int(w.Key(b, kTierLimit), d.TierLimit)
		b = w.Int(w.Key(b, kTierHits), d.TierHits)
		b = w.Bool(w.Key(b, kBurst), d.Burst)
		if d.HardLimit != NoLimit {
			b = w.Int(w.Key(b, kHardLimit), d.HardLimit)
		}
		if d.GlobalLimit != NoLimit {
			b = w.Int(w.Key(b, kGlobalLimit), d.GlobalLimit)
		}
		b = w.Int(w.Key(b, kDomainHitsLastSecond), d.DomainHitsLastSecond)
		b = w.Int(w.Key(b, kGlobalHitsLastSecond), d.GlobalHitsLastSecond)
		b = w.Bool(w.Key(b, kLimitedByHard), d.LimitedByHard)
		b = w.Bool(w.Key(b, kLimitedByGlobal), d.LimitedByGlobal)
	}
	b = w.Bool(w.Key(b, kShadow), d.Shadow)
	if d.Lenient {
		b = w.Bool(w.Key(b, kLenient), true)
	}
	if d.Ticket != "" {
		b = w.String(w.Key(b, kTicket), d.Ticket)
	}
	return w.End(b)
}

// Field returns where the decision field named name is held in d: an
// integer (i) or a boolean (b); both nil when name is no decision field.
// The Tiers flag is no field.
func (d *Decision) Field(name []byte) (i *int64, b *bool) {
	switch string(name) {
	case "granted":
		return &d.Granted, nil
	case NameRemaining:
		return &d.Remaining, nil
	case "retry_after_ms":
		return &d.RetryAfterMs, nil
	case "reset_after_ms":
		return &d.ResetAfterMs, nil
	case "tier":
		return &d.Tier, nil
	case "tier_limit":
		return &d.TierLimit, nil
	case "tier_hits":
		return &d.TierHits, nil
	case "burst":
		return nil, &d.Burst
	case "hard_limit":
		return &d.HardLimit, nil
	case "global_limit":
		return &d.GlobalLimit, nil
	case "domain_hits_last_second":
		return &d.DomainHitsLastSecond, nil
	case "global_hits_last_second":
		return &d.GlobalHitsLastSecond, nil
	case "limited_by_hard":
		return nil, &d.LimitedByHard
	case "limited_by_global":
		return nil, &d.LimitedByGlobal
	case "shadow":
		return nil, &d.Shadow
	case "lenient":
		return nil, &d.Lenient
	}
	return nil, nil
}
