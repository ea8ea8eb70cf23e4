# delivery_log: logs where coachd will deliver mail and push with the environment it is about to
# get (core/config.c's rules): a service's scheme, host and port, never its credentials; or the
# folder of the development files. Then where the email links lead, whether video is configured
# and where the API reference is. Source it after common.sh.
# shellcheck shell=bash

# scheme://host[:port] of URL, without user, password, path or query. Everything up to the last
# "@" goes first, so a password holding "/" or "?" is never printed, whatever else is lost.
delivery_endpoint() {
    local scheme="${1%%://*}" rest="${1#*://}"
    rest="${rest##*@}"
    printf '%s://%s' "$scheme" "${rest%%[/?#]*}"
}

delivery_log() {
    local prod=
    [ "${APP_ENV:-}" = production ] && prod=1
    if [ -n "${SMTP_URL:-}" ]; then
        log "mail: SMTP_URL ($(delivery_endpoint "$SMTP_URL"))"
    elif [ -n "$prod" ]; then
        log "mail: not delivered (SMTP_URL unset in production)"
    else
        log "mail: .eml files under ${MAIL_DIR:-.local/mail} (SMTP_URL unset)"
    fi
    if [ -n "${PUSH_URL:-}" ]; then
        log "push: PUSH_URL ($(delivery_endpoint "$PUSH_URL"))"
    elif [ -n "$prod" ]; then
        log "push: Expo's public endpoint (PUSH_URL unset in production)"
    else
        log "push: .json files under ${PUSH_DIR:-.local/push} (PUSH_URL unset)"
    fi
    local public="${PUBLIC_URL:-http://localhost:${PORT:-8080}}"
    if [ -n "${FRONTEND_URL:-}" ]; then
        log "email links: FRONTEND_URL ($(delivery_endpoint "$FRONTEND_URL"))"
    elif [ -z "$prod" ]; then
        log "email links: pages of coachd itself, $public/email-verification, /reset-password, /invite (FRONTEND_URL unset)"
    fi
    if [ -z "${VIDEO_APP_ID:-}" ] || [ -z "${VIDEO_APP_CERTIFICATE:-}" ]; then
        log "video: not configured (set VIDEO_APP_ID and VIDEO_APP_CERTIFICATE): token endpoints answer 503, /api/health says degraded"
    fi
    log "API reference: $public/api/docs (the document: $public/api/openapi.json)"
}
