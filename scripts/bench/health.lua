-- GET /api/health with the client key (BENCH_CLIENT_KEY).
dofile(os.getenv("BENCH_DIR") .. "/report.lua")
wrk.headers["X-Client-Key"] = os.getenv("BENCH_CLIENT_KEY")
