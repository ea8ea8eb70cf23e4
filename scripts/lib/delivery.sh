# delivery_log: logs where coachd will deliver mail and push with the environment it is about to
# get (core/config.c's rules): a service's scheme, host and port, never its credentials; or the
# folder of the development files. Source it after common.sh.
# shellcheck shell=bash

# scheme://host[:port] of URL, without user, password, path or query.
delivery_endpoint() {
    local scheme="${1%%://*}" rest="${1#*://}"
    rest="${rest%%[/?#]*}"
    printf '%s://%s' "$scheme" "${rest##*@}"
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
}
