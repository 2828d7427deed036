-- obol for HAProxy (2.6 or later, built with Lua, as Debian's package is):
-- the action obol_check asks the agent beside HAProxy, GET /v1/check, about
-- each request it runs on. haproxy.cfg beside this file shows its use.
--
--   http-request set-var(txn.obol_domain) src            -- who is counted
--   http-request lua.obol_check api/search                -- the resource
--   http-response set-header RateLimit %[var(txn.obol_ratelimit)] if { var(txn.obol_ratelimit) -m found }
--
-- A rejection is answered at once with the agent's own reply: 429,
-- Retry-After, the RateLimit fields and the decision as a JSON body; the
-- request never reaches the backend. An allowed request goes on with the
-- agent's RateLimit fields in txn.obol_ratelimit and txn.obol_ratelimit_policy
-- for http-response to add. When the agent cannot be asked (no socket,
-- refused, no answer within the timeout, a 5xx) the request goes on
-- unchecked and a warning is logged (fail open). Any other answer (400, 404
-- for a resource the agent does not have) is a 500: a configuration mistake
-- that must show. txn.obol_outcome says which: allowed, limited, open or
-- error, for logs.
--
-- Environment (HAProxy's `setenv` in the global section, or the process's):
--   OBOL_DST         the agent's address in HAProxy's form (default
--                    unix@/run/obol/obol.sock; 127.0.0.1:7070 for its HTTP)
--   OBOL_TIMEOUT_MS  how long one try of a check may take (100); HAProxy
--                    2.6 tries 4 times, so a stuck agent delays a request
--                    by up to 4 times this before it fails open


-- first returns the first value of the response header name (lower case).
local function first(headers, name)
    local v = headers and headers[name]
    if v == nil then return nil end
    return v[0] or v[1]
end

core.register_action("obol_check", { "http-req" }, function(txn, resource)
    -- Read at each call: HAProxy's setenv may come after lua-load.
    local dst = os.getenv("OBOL_DST") or "unix@/run/obol/obol.sock"
    local timeout = tonumber(os.getenv("OBOL_TIMEOUT_MS") or "100")
    local domain = txn:get_var("txn.obol_domain")
    if domain == nil or tostring(domain) == "" then
        domain = txn.f:src()
    end
    local ok, res = pcall(function()
        return core.httpclient():get{
            url = "http://obol/v1/check",
            dst = dst,
            timeout = timeout,
            headers = {
                ["obol-resource"] = { resource },
                ["obol-domain"] = { tostring(domain) },
            },
        }
    end)
    if not ok or res == nil or res.status == nil or res.status == 0 or res.status >= 500 then
        local why = (not ok and tostring(res)) or (res and res.status and res.status ~= 0 and ("status " .. res.status)) or "no answer"
        txn:set_var("txn.obol_outcome", "open")
        txn:Warning("obol: the check of " .. resource .. " failed (" .. why .. " from " .. dst .. "); the request goes on unchecked")
        return
    end
    local h = res.headers
    local rl, policy = first(h, "ratelimit"), first(h, "ratelimit-policy")
    if res.status >= 200 and res.status < 300 then
        txn:set_var("txn.obol_outcome", "allowed")
        if rl then txn:set_var("txn.obol_ratelimit", rl) end
        if policy then txn:set_var("txn.obol_ratelimit_policy", policy) end
        return
    end
    if res.status == 429 then
        txn:set_var("txn.obol_outcome", "limited")
        local headers = { ["content-type"] = { first(h, "content-type") or "application/json" } }
        for _, name in ipairs({ "retry-after", "ratelimit", "ratelimit-policy" }) do
            local v = first(h, name)
            if v then headers[name] = { v } end
        end
        txn:done(txn:reply{ status = 429, reason = "Too Many Requests", headers = headers, body = res.body or "" })
        return
    end
    txn:set_var("txn.obol_outcome", "error")
    txn:Alert("obol: the agent refused the check of " .. resource .. ": status " .. res.status .. ": " .. (res.body or ""))
    txn:done(txn:reply{ status = 500, headers = { ["content-type"] = { "text/plain" } }, body = "rate limit check misconfigured\n" })
end, 1)
