-- POST /api/auth/sign-in/email as the bench user (BENCH_EMAIL, BENCH_PASSWORD).
dofile(os.getenv("BENCH_DIR") .. "/report.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"email":"%s","password":"%s"}', os.getenv("BENCH_EMAIL"),
    os.getenv("BENCH_PASSWORD"))
