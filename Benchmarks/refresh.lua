-- wrk script: refresh-token rotation as devices do it. Each wrk thread holds its own share of the refresh tokens
-- (one a line in the file given as the first script argument, split across threads), sends the oldest one, and
-- keeps the successor from the answer, so no token is ever presented twice. Every request comes from a different
-- X-Forwarded-For address, so per-IP limits stay out of the measurement.
--   wrk -t 2 -c 32 -s Benchmarks/refresh.lua URL -- TOKENS_FILE THREADS
-- Give it one token per connection and one more per thread: wrk calls request() once before the run (to see whether
-- requests are pipelined), which takes a token from the first thread's share without sending it.
local next_thread = 0

function setup(thread)
  thread:set("id", next_thread)
  next_thread = next_thread + 1
end

function init(args)
  queue = {}
  local threads = tonumber(args[2])
  local index = 0
  for line in io.lines(args[1]) do
    if index % threads == id then queue[#queue + 1] = line end
    index = index + 1
  end
  counter = 0
end

function request()
  counter = counter + 1
  local token = table.remove(queue, 1)
  if token == nil then error("no refresh token left: an answer carried none") end
  local headers = {
    ["Content-Type"] = "application/json",
    ["X-Forwarded-For"] = "10." .. id .. "." .. (counter % 250) .. "." .. math.random(1, 250),
  }
  return wrk.format("POST", "/auth/v1/token?grant_type=refresh_token", headers, '{"refresh_token":"' .. token .. '"}')
end

function response(status, headers, body)
  local token = body:match('"refresh_token":"([^"]+)"')
  if token then queue[#queue + 1] = token else io.stderr:write("refresh.lua: answer " .. status .. ": " .. body:sub(1, 200) .. "\n") end
end
