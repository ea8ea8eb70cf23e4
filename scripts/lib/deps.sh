#!/usr/bin/env bash
# Installs the Debian packages coachd needs to build, run and test, when any is missing.
# Source it and call deps_install, or run it directly. COACHD_SKIP_DEPS=1 skips the check.

COACHD_PACKAGES=(
    build-essential pkg-config meson ninja-build
    libuv1-dev libpq-dev libhiredis-dev libmbedtls-dev libcurl4-openssl-dev libargon2-dev
    libjansson-dev zlib1g-dev node-llhttp libcmocka-dev
    postgresql postgresql-contrib redis-server
    python3 python3-pytest python3-pytest-timeout python3-requests
    curl wrk clang-format iproute2
    clang libclang-rt-14-dev
    prometheus python3-jsonschema python3-icalendar
    nginx openssl systemd
    chromium # headless, for the API reference page test (tests/api/test_reference_page.py)
)
# npm installs the API tests' peers (tests/api/package.json); use the machine's Node.js when it
# has one, else Debian's.
if ! command -v npm >/dev/null 2>&1; then COACHD_PACKAGES+=(nodejs npm); fi

# Prints the packages of COACHD_PACKAGES that are not installed.
deps_missing() {
    local pkg status
    for pkg in "${COACHD_PACKAGES[@]}"; do
        status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
        [ "$status" = installed ] || printf '%s\n' "$pkg"
    done
}

deps_install() {
    if [ "${COACHD_SKIP_DEPS:-0}" = 1 ]; then return 0; fi
    command -v dpkg-query >/dev/null || { echo "deps: not a Debian system; install the packages by hand: ${COACHD_PACKAGES[*]}" >&2; return 1; }
    local missing
    mapfile -t missing < <(deps_missing)
    if [ "${#missing[@]}" -eq 0 ]; then return 0; fi

    local -a as_root=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "deps: missing ${missing[*]} and not root (no sudo)" >&2; return 1; }
        as_root=(sudo)
    fi
    echo "deps: installing ${missing[*]}" >&2
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" </dev/null
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    deps_install
fi
