-- GET with the session cookie of the bench user (BENCH_COOKIE: "auth.session_token=...").
dofile(os.getenv("BENCH_DIR") .. "/report.lua")
wrk.headers["Cookie"] = os.getenv("BENCH_COOKIE")
