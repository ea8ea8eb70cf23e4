-- Sessions created and cancelled by one Coach (seed_org_writes.sql). BENCH_MODE=one: in 64
-- mentorships of one organization; many: one mentorship in each of 64 organizations. Each
-- thread keeps the sessions it created; the next request cancels one (DELETE) if there is
-- one waiting, else creates one at a random minute of 2031-2040 (so the 15-minute spacing
-- rule almost never answers 409; a 409 is counted by report.lua like any other status).
dofile(os.getenv("BENCH_DIR") .. "/report.lua")
local mode = os.getenv("BENCH_MODE") or "one"
local pending = {}

local function org_of(k)
    return string.format("c0000000-0000-4000-8000-%012d", mode == "one" and 100 or k)
end

local function mentorship_of(k)
    return string.format("c1000000-0000-4000-8000-%012d", mode == "one" and 100 + k or k)
end

local cookie = "auth.session_token=benchOrgWritesCoachSessionToken000000000000"

function init(args)
    math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end

-- wrk.format does not merge wrk.headers into the headers it is given.
local function headers(org, json)
    local h = {["Cookie"] = cookie, ["X-Organization-Id"] = org, ["Host"] = wrk.headers["Host"]}
    if json then h["Content-Type"] = "application/json" end
    return h
end

function request()
    local n = #pending
    if n > 0 then
        local p = table.remove(pending, n)
        return wrk.format("DELETE", "/api/sessions/" .. p.id, headers(p.org, false))
    end
    local k = math.random(0, 63)
    local t = os.time({year = 2031, month = 1, day = 1, hour = 0}) + math.random(0, 5000000) * 60
    local body = string.format('{"mentorshipId":"%s","scheduledAt":"%s","durationMinutes":15}',
        mentorship_of(k), os.date("!%Y-%m-%dT%H:%M:00Z", t))
    return wrk.format("POST", "/api/sessions", headers(org_of(k), true), body)
end

local report_response = response
function response(status, headers, body)
    report_response(status, headers, body)
    if status == 201 then
        local id = body:match('"id" *: *"([0-9a-f-]+)"')
        local org = body:match('"organizationId" *: *"([0-9a-f-]+)"')
        if id and org then table.insert(pending, {id = id, org = org}) end
    end
end
