-- wrk script: POST the body in $BODY_FILE, with Inference-Header-Content-Length when $HEADER_LEN is set.
wrk.method = "POST"
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
local h = os.getenv("HEADER_LEN")
if h ~= nil and h ~= "" then
  wrk.headers["Inference-Header-Content-Length"] = h
end
